# fmnode: one static binary on a small base. Build: docker build -t fmnode .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo), without the build path, with the profile-guided build.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/fmnode ./cmd/fmnode

# alpine for /bin/sh: the Kubernetes manifests derive the node id from the
# StatefulSet ordinal in the container's command.
FROM alpine:3.20
RUN adduser -D -u 10001 fmnode && mkdir -p /var/lib/fmnode && chown fmnode /var/lib/fmnode
COPY --from=build /out/fmnode /usr/local/bin/fmnode
USER fmnode
# node transport, API, gossip (TCP and UDP), DNS (TCP and UDP)
EXPOSE 7400 7401 7402 7402/udp 5353 5353/udp
ENTRYPOINT ["/usr/local/bin/fmnode"]
CMD ["agent", "--help"]
