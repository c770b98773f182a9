# Multi-stage build: compile with the Rust toolchain image, run on a slim Debian base as non-root.
#   docker build --build-arg EDGEPLANE_COMMIT=$(git rev-parse --short HEAD) -t edgeplane:0.1.0 .
# EDGEPLANE_COMMIT is what `edgeplane --version` and edgeplane_build_info report (.git is not
# copied into the build: without the argument they say `unknown`).
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# make: the bundled jemalloc is built from source.
RUN apt-get update && apt-get install -y --no-install-recommends make && rm -rf /var/lib/apt/lists/*
COPY .cargo .cargo
COPY Cargo.toml Cargo.lock build.rs ./
# build.rs's link order (build/link-order.txt) and its linker-script maker.
COPY build build
COPY src src
COPY benches benches
ARG EDGEPLANE_COMMIT=unknown
# The release profile strips symbols (Cargo.toml).
RUN EDGEPLANE_COMMIT=${EDGEPLANE_COMMIT} cargo build --release --locked --bin edgeplane

FROM debian:bookworm-slim
RUN useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin edgeplane
COPY --from=build /src/target/release/edgeplane /usr/local/bin/edgeplane
USER 65532:65532
# 9901: admin (/metrics, /healthz, /readyz). 9443: the CRD conversion webhook (HTTPS).
# 10080: the first Gateway listener target port. In Kubernetes mode every listener port of
# every Gateway is served on a target port of its own, handed out from --gateway-port-base
# (10080) up to 10,000 ports on (10081, 10082...); the Gateway's Service maps the listener
# port (80, 443...) to it.
EXPOSE 9901/tcp 9443/tcp 10080/tcp
ENTRYPOINT ["/usr/local/bin/edgeplane"]
# Kubernetes mode (in-cluster credentials); see deploy/ for the manifests. For standalone mode
# run `serve --config-dir /etc/edgeplane/config` on a mounted directory instead.
CMD ["serve", "--kubernetes", "--admin-addr", "0.0.0.0:9901", "--bind-address", "0.0.0.0"]
