# syntax=docker/dockerfile:1
# Multi-stage build: a static modelgate binary on distroless static, as
# non-root. `make image` builds the same image without Docker
# (hack/imagebuild, FROM SCRATCH): /modelgate (root-owned, 0755), the CA
# bundle at /etc/ssl/certs/ca-certificates.crt, the nonroot user 65532, /tmp,
# and the labels, user, entrypoint and command below. Change both together.

# The builder runs on the build machine's platform and cross-compiles.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
WORKDIR /src

# Dependencies first, for layer caching.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/modelgate ./cmd/modelgate

# distroless static nonroot has the CA bundle, /etc/passwd with nonroot
# 65532 and /tmp.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=
LABEL org.opencontainers.image.source="https://github.com/modelgate/modelgate" \
      org.opencontainers.image.description="Admission webhook and policy engine for GPU and AI workloads" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /
COPY --from=builder --chown=0:0 --chmod=0755 /out/modelgate /modelgate
USER 65532:65532
ENTRYPOINT ["/modelgate"]
CMD ["serve"]
