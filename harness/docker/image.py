"""Build the kraftsim container image without any image registry.

Why two stages: this machine (and many lab CI hosts) cannot reach Docker Hub, so the base
image is made here — ``debootstrap --variant=minbase bookworm`` from the Debian mirror
apt already uses, imported with ``docker import`` — and the project image is an ordinary
Dockerfile (``docker/Dockerfile``) whose ``BASE_IMAGE`` build argument is that local base
(or ``python:3.11-slim-bookworm`` where a registry is reachable). The base takes minutes
and never changes, so it is cached: skipped when its tag exists unless forced.

kraftsim needs only the standard library and kio (a compiled cp311 wheel, which pulls in
crc32c); the wheels are fetched on the host with ``pip download`` (or taken from a
directory given with ``--wheels``) and installed in the image with ``--no-index``, so the
image build itself needs no network.

The Docker engine is ``ensure_engine``'s job: it starts ``dockerd`` when none answers and
keeps the faultline test bridges (``flbr-*``) forwarding, because dockerd's
``FORWARD DROP`` policy plus ``br_netfilter`` otherwise silently drops traffic between
network-namespace test hosts on one bridge.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "docker" / "Dockerfile"
BASE_TAG = "faultline/base:bookworm"
IMAGE_TAG = "faultline/kraftsim:latest"
SUITE = "bookworm"
#: what the base needs: python3 for kraftsim (and the nemeses' scripts piped to it), iproute2/
#: iptables for network faults run in the container's namespace, procps for pgrep/kill,
#: python3-pip to install the wheels, and a JRE for real Kafka (harness/docker/kafka_image.py:
#: Kafka 4.x brokers need Java 17); one base for both images, so a cold machine debootstraps once
BASE_PACKAGES = ["python3", "python3-pip", "python-is-python3", "iproute2", "iptables", "procps",
                 "openjdk-17-jre-headless"]
#: the base's label listing its packages: a base made with other packages is rebuilt, not reused
PACKAGES_LABEL = "org.faultline.base-packages"
#: the project packages copied into the image (kraftsim runs there; the rest is small and
#: lets an operator run faultline's own scripts inside a container)
PROJECT_DIRS = ["kraftsim", "groundwork", "harness", "nemeses", "workloads", "checkers"]
#: the wheels kraftsim needs, resolved with their dependencies by pip
REQUIREMENTS = ["kio==0.6.5"]
DEFAULT_MIRROR = "http://deb.debian.org/debian"


class ImageBuildError(RuntimeError):
    """The image could not be built; the message is one line saying why."""


@dataclass
class BuildResult:
    base_tag: str
    base_built: bool
    base_seconds: float
    image_tag: str
    image_built: bool
    image_seconds: float


def log(msg: str) -> None:
    print(f"docker-image: {msg}", file=sys.stderr, flush=True)


def apt_mirror(sources: tuple[str, ...] = ("/etc/apt/sources.list",),
               sources_dir: str = "/etc/apt/sources.list.d") -> str:
    """The Debian mirror apt on this host already uses (reachable by construction)."""
    files = [Path(s) for s in sources]
    if os.path.isdir(sources_dir):
        files += sorted(Path(sources_dir).glob("*"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        # deb822 ("URIs: ...") and one-line ("deb URL suite ...") formats
        for m in re.finditer(r"^(?:URIs:\s*(\S+)|deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+))", text, re.M):
            uri = m.group(1) or m.group(2)
            if uri and re.search(r"/debian/?$", uri):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def client() -> docker.DockerClient:
    try:
        c = docker.from_env(timeout=300)
        c.ping()
        return c
    except docker.errors.DockerException as e:
        raise ImageBuildError(f"docker engine not reachable at {os.environ.get('DOCKER_HOST', 'unix:///var/run/docker.sock')}: "
                              f"{str(e).splitlines()[0][:160]} (start it: dockerd >/tmp/dockerd.log 2>&1 &)") from e


def ensure_engine(wait_s: float = 60.0, log_path: str = "/tmp/dockerd.log") -> docker.DockerClient:
    """Return a client for a running engine, starting ``dockerd`` (as root) when none answers."""
    try:
        c = docker.from_env(timeout=300)
        c.ping()
    except docker.errors.DockerException:
        if os.geteuid() != 0 or not shutil.which("dockerd"):
            raise ImageBuildError("docker engine not running and cannot start dockerd here "
                                  "(needs root and the docker.io package)")
        with open(log_path, "ab") as fh:
            subprocess.Popen(["dockerd"], stdout=fh, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                c = docker.from_env(timeout=300)
                c.ping()
                break
            except docker.errors.DockerException:
                if time.monotonic() > deadline:
                    raise ImageBuildError(f"dockerd did not answer within {wait_s:.0f}s (see {log_path})")
                time.sleep(0.5)
    return c


def image_exists(c: docker.DockerClient, tag: str) -> bool:
    try:
        c.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def base_packages(c: docker.DockerClient, tag: str) -> str | None:
    """The package list a base was made with (its label), None when it has none or is absent."""
    try:
        return (c.images.get(tag).labels or {}).get(PACKAGES_LABEL)
    except docker.errors.ImageNotFound:
        return None


def build_base(c: docker.DockerClient, tag: str = BASE_TAG, *, mirror: str | None = None,
               force: bool = False, workdir: str | None = None) -> tuple[bool, float]:
    """debootstrap a minbase bookworm root filesystem and ``docker import`` it as ``tag``.

    Returns (built, seconds); built is False when the tag already holds a base of these
    packages (an older base, made without the JRE, is rebuilt)."""
    packages = ",".join(BASE_PACKAGES)
    if image_exists(c, tag) and not force:
        if base_packages(c, tag) == packages:
            log(f"base image {tag} exists, not rebuilding (use --rebuild-base to force)")
            return False, 0.0
        log(f"base image {tag} was made with other packages; rebuilding it with {packages}")
    if os.geteuid() != 0:
        raise ImageBuildError("building the base image runs debootstrap, which needs root")
    if not shutil.which("debootstrap"):
        raise ImageBuildError("debootstrap not found: apt-get install debootstrap")
    mirror = mirror or apt_mirror()
    t0 = time.monotonic()
    root = tempfile.mkdtemp(prefix="fl-rootfs-", dir=workdir)
    tar_path = root + ".tar"
    try:
        log(f"debootstrap --variant=minbase {SUITE} from {mirror} (a few minutes)")
        p = subprocess.run(["debootstrap", "--variant=minbase", f"--include={packages}",
                            SUITE, root, mirror], capture_output=True, text=True)
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()
            raise ImageBuildError(f"debootstrap from {mirror} failed: {tail[-1] if tail else 'exit ' + str(p.returncode)}")
        # an image does not need apt's caches; keep it small
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            d = Path(root, sub)
            for child in d.glob("*"):
                if child.is_file():
                    child.unlink()
        subprocess.run(["tar", "--numeric-owner", "-C", root, "-cf", tar_path, "."], check=True)
        log(f"docker import -> {tag}")
        repo, _, tg = tag.partition(":")
        c.api.import_image_from_file(tar_path, repository=repo, tag=tg or "latest",
                                     changes=["CMD [\"/bin/bash\"]",
                                              "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                              "LABEL org.faultline.base=debootstrap-minbase-" + SUITE,
                                              f"LABEL {PACKAGES_LABEL}={packages}"])
        if not image_exists(c, tag):
            raise ImageBuildError(f"docker import of {tar_path} did not produce {tag}")
    except subprocess.CalledProcessError as e:
        raise ImageBuildError(f"packing the root filesystem failed: {e}") from e
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if os.path.exists(tar_path):
            os.unlink(tar_path)
    return True, time.monotonic() - t0


def fetch_wheels(dest: Path, wheels_dir: str | None = None) -> None:
    """Put kio and its dependencies' wheels for CPython 3.11 / manylinux into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    if wheels_dir:
        for w in Path(wheels_dir).glob("*.whl"):
            shutil.copy2(w, dest / w.name)
        return
    p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(dest),
                        "--only-binary", ":all:", "--python-version", "3.11", "--implementation", "cp",
                        "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                        "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64",
                        *REQUIREMENTS], capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not any(dest.glob("kio-*.whl")):
        tail = [ln for ln in (p.stderr or p.stdout).splitlines() if ln.startswith("ERROR")]
        raise ImageBuildError("pip download of " + " ".join(REQUIREMENTS) + " failed: "
                              + (tail[-1] if tail else f"exit {p.returncode}")
                              + " (pass --wheels DIR holding kio/crc32c/typing_extensions wheels)")


_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "results", ".pytest_cache")


def source_hash(project_root: Path, base: str) -> str:
    """A digest of everything that goes into the image, to skip rebuilding an identical one."""
    h = hashlib.sha256()
    h.update(f"{base}\0{' '.join(REQUIREMENTS)}\0".encode())
    h.update((project_root / "docker" / "Dockerfile").read_bytes())
    for d in PROJECT_DIRS:
        root = project_root / d
        for f in sorted(root.rglob("*")) if root.is_dir() else []:
            rel = f.relative_to(project_root)
            if f.is_file() and "__pycache__" not in rel.parts and f.suffix != ".pyc":
                h.update(str(rel).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_image(c: docker.DockerClient, tag: str = IMAGE_TAG, *, base: str = BASE_TAG,
                wheels_dir: str | None = None, project_root: Path = REPO_ROOT,
                force: bool = False) -> tuple[bool, float]:
    """Build ``docker/Dockerfile`` with the project source and kio wheels.

    Returns (built, seconds); not rebuilt when ``tag`` already holds this exact source."""
    t0 = time.monotonic()
    digest = source_hash(project_root, base)
    if not force and up_to_date(c, tag, digest):
        log(f"image {tag} is up to date with the source ({digest}), not rebuilding")
        return False, 0.0
    ctx = Path(tempfile.mkdtemp(prefix="fl-image-ctx-"))
    try:
        shutil.copy2(project_root / "docker" / "Dockerfile", ctx / "Dockerfile")
        src = ctx / "src"
        src.mkdir()
        for d in PROJECT_DIRS:
            if (project_root / d).is_dir():
                shutil.copytree(project_root / d, src / d, ignore=_IGNORE)
        fetch_wheels(ctx / "wheels", wheels_dir)
        log(f"docker build {tag} (BASE_IMAGE={base})")
        docker_build(c, ctx, tag, base, {"org.faultline.image": "kraftsim", "org.faultline.src-hash": digest})
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    return True, time.monotonic() - t0


def up_to_date(c: docker.DockerClient, tag: str, digest: str) -> bool:
    """``tag`` exists and was built from exactly this content (its ``org.faultline.src-hash``)."""
    try:
        return (c.images.get(tag).labels or {}).get("org.faultline.src-hash") == digest
    except docker.errors.ImageNotFound:
        return False


def docker_build(c: docker.DockerClient, ctx: Path, tag: str, base: str, labels: dict[str, str]) -> None:
    """``docker build`` of a prepared context FROM ``base``; a failure is one line (its last
    build output). The previous build of the tag, now dangling, is pruned (by the image's kind,
    ``labels["org.faultline.image"]``) so rebuilds do not pile up."""
    try:
        c.images.build(path=str(ctx), tag=tag, buildargs={"BASE_IMAGE": base}, rm=True, forcerm=True, labels=labels)
    except docker.errors.BuildError as e:
        lines = [str(x.get("stream", x.get("error", ""))).strip() for x in e.build_log]
        lines = [ln for ln in lines if ln]
        raise ImageBuildError(f"docker build of {tag} failed: {lines[-1] if lines else e.msg}") from e
    except docker.errors.APIError as e:
        raise ImageBuildError(f"docker build of {tag} failed: {e.explanation or e}") from e
    try:
        c.images.prune(filters={"dangling": True, "label": f"org.faultline.image={labels['org.faultline.image']}"})
    except docker.errors.APIError:
        pass


def build_all(*, base: str = BASE_TAG, tag: str = IMAGE_TAG, rebuild_base: bool = False,
              mirror: str | None = None, wheels_dir: str | None = None,
              base_image: str | None = None, rebuild_image: bool = False) -> BuildResult:
    """The documented one-command build: local base (cached) then the kraftsim image.

    ``base_image`` skips debootstrap and builds FROM an existing image instead (e.g.
    ``python:3.11-slim-bookworm`` where a registry is reachable)."""
    c = ensure_engine()
    if base_image:
        built, base_s, base = False, 0.0, base_image
    else:
        built, base_s = build_base(c, base, mirror=mirror, force=rebuild_base)
    image_built, image_s = build_image(c, tag, base=base, wheels_dir=wheels_dir, force=rebuild_image)
    return BuildResult(base, built, base_s, tag, image_built, image_s)
