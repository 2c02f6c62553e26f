# The Redis of scripts/docker-ci.sh's scale-out: Debian 12's redis-server
# built FROM the local Debian image, because CI reaches no container
# registry (valkey/valkey, the image docker-compose.yml's scale profile
# uses, cannot be pulled there). Run with --network host and the port as
# an argument: docker run ... IMAGE --port 13005
ARG BASE_IMAGE=debian:12
FROM ${BASE_IMAGE}
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
USER redis
WORKDIR /tmp
# No persistence (--save "" --appendonly no): nothing is written, so the
# container runs with a read-only root filesystem. noeviction: a full
# server refuses writes (the gateway then refuses single-use decisions)
# rather than forgetting a used code or refresh token.
ENTRYPOINT ["redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--maxmemory", "64mb", "--maxmemory-policy", "noeviction"]
