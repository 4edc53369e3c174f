# syntax=docker/dockerfile:1
# Multi-stage build: a static modelgate binary on distroless, as non-root.

FROM golang:1.26 AS builder
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

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.source="https://github.com/modelgate/modelgate" \
      org.opencontainers.image.description="Admission webhook and policy engine for GPU and AI workloads" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /
COPY --from=builder /out/modelgate /modelgate
USER 65532:65532
ENTRYPOINT ["/modelgate"]
CMD ["serve"]
