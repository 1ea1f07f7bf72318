// The nginx configuration of docs/deploy.md "Behind a load balancer" as text: the part of
// nginx.conf's `http` block that puts nginx in front of Pinboard replicas. The end-to-end test
// runs exactly this (Nginx.ts wraps it in what a test process needs), and checks that the docs'
// block is this text for the docs' example addresses, so the documented configuration is the
// tested one.

export interface NginxReplica {
  /** host:port of the replica's data listener (PINBOARD_PORT). */
  readonly data: string
  /** host:port of its registry API listener (PINBOARD_REGISTRY_PORT). */
  readonly registry: string
  /** Taken out by hand (`down`), as an operator does before stopping it. */
  readonly down?: boolean
}

export interface NginxSite {
  /** The clients' listener: `80`, or `127.0.0.1:PORT` in a test. */
  readonly listen: string
  /** The workers' listener, on an address only they reach. */
  readonly registryListen: string
  readonly replicas: ReadonlyArray<NginxReplica>
}

/** The example of docs/deploy.md: two replicas, the workers' listener on an internal address. */
export const DOCUMENTED_SITE: NginxSite = {
  listen: "80",
  registryListen: "10.0.0.5:8081",
  replicas: [
    { data: "10.0.1.11:8080", registry: "10.0.1.11:8081" },
    { data: "10.0.1.12:8080", registry: "10.0.1.12:8081" }
  ]
}

const serverLine = (address: string, down: boolean | undefined) =>
  `    server ${address} max_fails=2 fail_timeout=5s${down === true ? " down" : ""};`

export const nginxSite = (site: NginxSite): string =>
  [
    "map $http_upgrade $connection_upgrade {",
    "    default upgrade;",
    '    ""      "";',
    "}",
    "",
    "upstream pinboard {",
    ...site.replicas.map((replica) => serverLine(replica.data, replica.down)),
    "    keepalive 32;",
    "    keepalive_timeout 60s;",
    "}",
    "",
    "upstream pinboard_registry {",
    ...site.replicas.map((replica) => serverLine(replica.registry, replica.down)),
    "    keepalive 8;",
    "    keepalive_timeout 60s;",
    "}",
    "",
    "server {",
    `    listen ${site.listen};`,
    "    client_max_body_size 0;",
    "",
    "    location / {",
    "        proxy_pass http://pinboard;",
    "        proxy_http_version 1.1;",
    "        proxy_set_header Host $host;",
    "        proxy_set_header Connection $connection_upgrade;",
    "        proxy_set_header Upgrade $http_upgrade;",
    "        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
    "        proxy_buffering off;",
    "        proxy_request_buffering off;",
    "        proxy_connect_timeout 5s;",
    "        proxy_read_timeout 1h;",
    "        proxy_send_timeout 1h;",
    "        proxy_next_upstream error timeout;",
    "    }",
    "}",
    "",
    "server {",
    `    listen ${site.registryListen};`,
    "",
    "    location /registry/ {",
    "        proxy_pass http://pinboard_registry;",
    "        proxy_http_version 1.1;",
    '        proxy_set_header Connection "";',
    "        proxy_next_upstream error timeout;",
    "    }",
    "}",
    ""
  ].join("\n")
