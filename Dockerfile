# cborgate container image.
#
#   docker build --build-arg CBORGATE_GIT_COMMIT="$(git rev-parse --short=12 HEAD)" \
#       -t REGISTRY/cborgate:TAG .
#   docker run --rm -p 8080:8080 -p 9464:9464 REGISTRY/cborgate:TAG \
#       serve --listen :8080 --admin :9464 --upstream https://apiserver.example:6443
#
# CBORGATE_GIT_COMMIT stamps the commit into `--version` and cborgate_build_info
# (build.rs); the build context has no .git (.dockerignore), so without it both
# say `unknown`. .github/workflows/release.yml passes it.
#
# Without arguments the image prints `cborgate serve --help` (CMD below) and
# exits 0: serving needs at least --upstream, which no default can guess, and
# --listen/--admin on a reachable address (cborgate's own defaults bind
# 127.0.0.1, unreachable from outside the container).
#
# Base images are pinned by digest (tag kept for readers). The digests are the
# ones public projects pin for these tags (rust:1.95-bookworm,
# gcr.io/distroless/cc-debian12:nonroot); they were not re-resolved against the
# registries from the machine that wrote this (no registry access there).
# Refresh both together with
#   docker buildx imagetools inspect rust:1.95-bookworm
#   docker buildx imagetools inspect gcr.io/distroless/cc-debian12:nonroot
# and keep them multi-platform index digests. tests/dockerfile.rs checks every
# FROM has one.

############################ builder ############################
# Pinned toolchain: the same Rust the project is developed and tested with.
FROM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS builder
WORKDIR /src

# 1) Dependency cache layer: only the manifests and the shims/ crates.
#    shims/libz-ng-sys is used through [patch.crates-io] in Cargo.toml, so it
#    must be present before any cargo command runs. Cargo.toml declares a
#    workspace (members = ["bench/load", "standin"]): cargo loads every member's
#    manifest before any command, so each member's Cargo.toml is copied here too
#    (without it: "failed to load manifest for workspace member"). `cargo build`
#    at the root of a workspace with a root package (and no default-members)
#    builds only that package, so the members' sources are never read. The image
#    is built with --no-default-features: no `demo` command, so the stand-in
#    apiserver (standin/, an optional dependency of that feature) is not compiled
#    in; its manifest is still needed to resolve the workspace, and an empty
#    placeholder lib stands in for its sources. A placeholder lib + bin for
#    cborgate lets cargo compile its whole dependency graph; this layer is rebuilt
#    only when a manifest, Cargo.lock or shims/ changes. tests/dockerfile.rs
#    runs this RUN on exactly these files and checks every workspace member is
#    copied.
COPY Cargo.toml Cargo.lock ./
COPY bench/load/Cargo.toml bench/load/
COPY standin/Cargo.toml standin/
COPY shims/ shims/
RUN mkdir -p src standin/src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs standin/src/lib.rs \
 && cargo build --release --locked --no-default-features --features jemalloc \
 && rm -rf src standin/src

# 2) The real build. Remove every artefact of the placeholder crate so cargo
#    cannot mistake it for up to date (COPY keeps the sources' old mtimes,
#    which may be older than the placeholder build), then build for real,
#    without the `demo` feature (and so without the stand-in), and check that
#    the binary has no `demo` command.
COPY . .
# The build context has no .git (.dockerignore): the commit for `--version` and
# cborgate_build_info comes in as a build argument
# (`docker build --build-arg CBORGATE_GIT_COMMIT=$(git rev-parse --short=12 HEAD) .`).
ARG CBORGATE_GIT_COMMIT=unknown
ENV CBORGATE_GIT_COMMIT=${CBORGATE_GIT_COMMIT}
RUN rm -rf target/release/.fingerprint/cborgate-* \
           target/release/deps/cborgate-* \
           target/release/deps/libcborgate-* \
           target/release/cborgate target/release/libcborgate.* \
 && touch src/main.rs src/lib.rs \
 && cargo build --release --locked --no-default-features --features jemalloc \
 && ./target/release/cborgate --help >/dev/null \
 && ! ./target/release/cborgate --help | grep -qw demo \
 && install -D -m 0755 target/release/cborgate /out/cborgate

############################ runtime ############################
# glibc + libgcc only (cc-debian12 matches the bookworm builder), CA certificates
# included, no shell, no package manager. The :nonroot tag runs as uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=builder /out/cborgate /usr/local/bin/cborgate
# Numeric user so that Kubernetes' runAsNonRoot check can verify it.
USER 65532:65532
# 8080: proxy listener (plain HTTP unless --tls-cert/--tls-key are given)
# 9464: admin listener: /metrics, /healthz, /readyz
EXPOSE 8080 9464
# Health checking: distroless has no shell and no curl, so there is no Docker
# HEALTHCHECK here. In Kubernetes use httpGet probes on the admin port:
#   livenessProbe:  httpGet { path: /healthz, port: 9464 }   (200 while the process runs)
#   readinessProbe: httpGet { path: /readyz,  port: 9464 }   (200 once the upstream answered)
# (see deploy/). Outside Kubernetes, probe from the host:
#   curl -fsS http://127.0.0.1:9464/healthz
ENTRYPOINT ["/usr/local/bin/cborgate"]
# What `cborgate serve` needs, rather than a start that exits 2 for want of
# --upstream. Run it as in the header (the deploy/ manifests give every flag).
CMD ["serve", "--help"]
