# Multi-stage build: compile with the Rust toolchain image, run on a slim Debian base as non-root.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# make: the bundled jemalloc is built from source.
RUN apt-get update && apt-get install -y --no-install-recommends make && rm -rf /var/lib/apt/lists/*
COPY .cargo .cargo
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY benches benches
RUN cargo build --release --locked --bin edgeplane \
 && strip target/release/edgeplane

FROM debian:bookworm-slim
RUN useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin edgeplane
COPY --from=build /src/target/release/edgeplane /usr/local/bin/edgeplane
USER 65532:65532
EXPOSE 8080 9901
ENTRYPOINT ["/usr/local/bin/edgeplane"]
# Kubernetes mode (in-cluster credentials); see deploy/ for the manifests. For standalone mode
# run `serve --config-dir /etc/edgeplane/config` on a mounted directory instead.
CMD ["serve", "--kubernetes", "--admin-addr", "0.0.0.0:9901", "--bind-address", "0.0.0.0"]
