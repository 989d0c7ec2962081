# The host image of a containerlab lab that `mrc topo export` writes (docs/fabric.md): Debian 12
# with mrckit, its BPF objects and the P4 artifacts, so that the same image runs a host agent
# (`mrc host up`) or the controller. Build it from the repository root:
#   docker build -f docker/mrckit-host.Dockerfile -t mrckit-host:latest .
FROM debian:12-slim

# The packages `make venv bpf native` needs: a BPF compiler and libbpf, ISA-L for the native
# endpoint, Python, and the tools the agent runs (ip, ethtool, mountpoint).
RUN apt-get update \
 && apt-get install -y --no-install-recommends clang llvm libbpf-dev gcc make \
      python3 python3-venv python3-pip iproute2 ethtool util-linux ca-certificates libisal-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/mrckit
COPY . .
# The apt stamp says the packages are installed (above), so make does not run apt-get again.
RUN mkdir -p .stamps && touch .stamps/apt && make venv bpf native
ENV PATH=/opt/mrckit/.venv/bin:$PATH
CMD ["sleep", "infinity"]
