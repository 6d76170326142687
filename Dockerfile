# herald in a container (docs/operations.md): a multi-stage build into Debian slim,
# running as an unprivileged user with its home as a volume.
#   docker build -t herald .
#   docker run -d -p 127.0.0.1:8644:8644 -v herald-home:/var/lib/herald herald
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p herald-cli \
 && install -D -m 0755 target/release/herald /out/herald

FROM debian:bookworm-slim
# ca-certificates for HTTPS to providers and chat platforms; python3 for route scripts
# and Hermes Python plugins (leave it out if you use neither).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/herald --shell /usr/sbin/nologin herald \
 && install -d -o herald -g herald -m 0700 /var/lib/herald
COPY --from=build /out/herald /usr/local/bin/herald
USER herald
ENV HERALD_HOME=/var/lib/herald
VOLUME ["/var/lib/herald"]
# The webhook listener must bind beyond loopback inside a container: set
# platforms.webhook.extra.host: 0.0.0.0 in the home's config.yaml (and a secret).
EXPOSE 8644 8642
# `herald health` asks the running gateway's /health/detailed (no curl needed).
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 \
  CMD ["herald", "health", "--timeout", "5"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["herald"]
CMD ["gateway", "run"]
