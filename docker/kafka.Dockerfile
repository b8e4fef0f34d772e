# A real Apache Kafka target image: one release's jars on the faultline base (a debootstrap
# minbase with openjdk-17-jre-headless, python3, iproute2, iptables, procps, made locally).
# Built by `faultline docker build-image --kafka VERSION` (harness/docker/kafka_image.py), which
# puts the release's jars (from the Maven-resolved release cache), bin/ scripts and Kafka's own
# log4j config into the build context, so the build needs no registry and no network.
ARG BASE_IMAGE=faultline/base:bookworm
FROM ${BASE_IMAGE}

COPY kafka /opt/kafka
# fail the build, not the first run, when the base has no JRE or the jars are missing
RUN java -version 2>&1 | head -1 && ls /opt/kafka/libs/kafka_2.1*-*.jar >/dev/null
ENV PATH=/opt/kafka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /var/lib/kafka
LABEL org.faultline.image=kafka

# A container is a "host": it idles under an init (run it with --init) and faultline starts
# Kafka in it (`kafka-server-start.sh /etc/kafka/server.properties`), exactly as on a lab host.
CMD ["sleep", "infinity"]
