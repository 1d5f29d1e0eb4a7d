# ingressbench's image: one static binary on an empty image. On a cluster it runs the
# backends (`kubernetes.image: ingressbench`: `ingressbench backend`, with the
# scenario's delays and drains) and the generators of a distributed run.
#
#   docker build -t ingressbench:0.1.0 .
#   kind load docker-image ingressbench:0.1.0          # or: docker push <registry>/ingressbench:0.1.0
#
# The version in the tag is what `kubernetes.image: ingressbench` resolves to
# (`ingressbench:<version of the binary that runs the scenario>`); any reference whose
# repository is named `ingressbench` also works (docs/kubernetes.md).

# musl, so that the binary needs no libc and runs on `scratch`. ring (rustls' crypto)
# builds its C and assembly with the image's gcc and musl headers.
FROM rust:1.95-alpine AS build
RUN apk add --no-cache musl-dev gcc make perl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin ingressbench \
    && cp target/release/ingressbench /ingressbench \
    && strip /ingressbench

FROM scratch
COPY --from=build /ingressbench /ingressbench
# Unprivileged; the backend listens on 8080, above the privileged ports.
USER 65534:65534
ENTRYPOINT ["/ingressbench"]
