// What Kafka's storage does to a file, with the JVM calls Kafka uses, run by `java KafkaLikeWrites.java DIR`:
// - a segment: FileChannel writes, FileChannel.force(true) (LogSegment.flush -> FileRecords.flush),
//   then more writes never forced;
// - an index: RandomAccessFile.setLength (AbstractIndex's preallocation), a READ_WRITE
//   MappedByteBuffer, one page forced (AbstractIndex.flush -> MappedByteBuffer.force), one not;
// - the directory: FileChannel.open(dir, READ).force(true) (Utils.flushDir).
// Prints "ready" and waits to be SIGKILLed, as a broker is by a reboot.
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

public class KafkaLikeWrites {
    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        try (FileChannel seg = FileChannel.open(dir.resolve("00000000000000000000.log"),
                StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.READ)) {
            seg.write(ByteBuffer.wrap("D".repeat(4096).getBytes(StandardCharsets.US_ASCII)));
            seg.force(true);
            seg.write(ByteBuffer.wrap("U".repeat(1000).getBytes(StandardCharsets.US_ASCII)));
        }
        RandomAccessFile raf = new RandomAccessFile(dir.resolve("00000000000000000000.index").toFile(), "rw");
        raf.setLength(3 * 4096);
        MappedByteBuffer idx = raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, 3 * 4096);
        idx.put(0, "KEEP".getBytes(StandardCharsets.US_ASCII));
        idx.force(0, 4096);
        try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
            d.force(true);
        }
        idx.put(4096, "LOST".getBytes(StandardCharsets.US_ASCII));
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(120_000);
    }
}
