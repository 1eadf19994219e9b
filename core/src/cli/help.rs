//! The examples each client command's --help ends with: one line of use is
//! what a reader looks for first.

/// The example lines, then where every client command finds the core (its
/// "Admin API" options) and what -o json prints.
macro_rules! examples {
    ($($line:literal),+ $(,)?) => {
        concat!(
            "Examples:\n",
            $("  ", $line, "\n",)+
            "\nThe core is reached at http://127.0.0.1:7311, or --admin URL / CUMULO_ADMIN,\n",
            "with --token / CUMULO_ADMIN_TOKEN, --token-file / CUMULO_ADMIN_TOKEN_FILE,\n",
            "or the [admin] section of --config FILE;\n",
            "-o json prints the admin API's answer (docs/ADMIN.md)."
        )
    };
}

pub const SERVICES: &str = examples!(
    "cumulo services list                          the services of the core running here",
    "cumulo services show 3                        service 3: patterns, processes, configuration",
    "cumulo services update 3 --count-process 4    run more processes of service 3",
);
pub const SERVICES_ADD: &str = examples!(
    "cumulo services add more.toml                 the [[service]] tables of a file",
    "cumulo services add --json '{\"prefix\": \"/e/\", \"internal\": \"echo\"}'",
);
pub const SERVICES_LIST: &str = examples!(
    "cumulo services list                          one line per service",
    "cumulo services list -o json                  the same as JSON, for scripts",
);
pub const SERVICES_SHOW: &str = examples!(
    "cumulo services show 3                        service 3 in words",
    "cumulo services show 3 -o json                GET /v1/services/3 as the API answers it",
);
pub const SERVICES_REMOVE: &str =
    examples!("cumulo services remove 3                      stop service 3 gracefully and forget it",);
pub const SERVICES_RESTART: &str =
    examples!("cumulo services restart 3                     restart its processes one after the other",);
pub const SERVICES_UPDATE: &str = examples!(
    "cumulo services update 3 --count-process 4    run 4 processes of service 3",
    "cumulo services update 3 --timeout-sync 2000 --queue-size 16777216",
);
pub const SUBSCRIPTIONS: &str = examples!(
    "cumulo subscriptions                          every pattern, with who serves it",
    "cumulo subscriptions --prefix /tests/         the patterns under /tests/",
    "cumulo subscriptions --service 3 -o json      service 3's patterns and instances, as JSON",
);
pub const STATUS: &str =
    examples!("cumulo status                                 services, instances, requests of the core",);
pub const NODES: &str =
    examples!("cumulo nodes                                  this node and the others of its cloud",);
pub const QUEUES: &str = examples!(
    "cumulo queues                                 depth, deliveries, dead letters of each queue",
    "cumulo queues replay --queue /queue/          send a queue's dead letters again",
);
pub const QUEUES_LIST: &str =
    examples!("cumulo queues list                            depth, deliveries, dead letters of each queue",);
pub const QUEUES_DEAD: &str =
    examples!("cumulo queues dead --queue /queue/ --limit 5  the 5 oldest dead letters of /queue/",);
pub const QUEUES_REPLAY: &str =
    examples!("cumulo queues replay --queue /queue/          send /queue/'s dead letters again",);
pub const QUEUES_PURGE: &str =
    examples!("cumulo queues purge --queue /queue/           forget /queue/'s dead letters",);
pub const RESILIENCY: &str = examples!(
    "cumulo resiliency                             policies, breakers, ejected instances, retries",
    "cumulo resiliency reset --policy payments     close the breakers of policy payments",
    "cumulo resiliency set policies.toml           replace the policies with the file's [[policy]]",
);
pub const RESILIENCY_SHOW: &str =
    examples!("cumulo resiliency show -o json                GET /v1/resiliency as the API answers it",);
pub const RESILIENCY_RESET: &str = examples!(
    "cumulo resiliency reset                       close every breaker, on every shard",
    "cumulo resiliency reset --policy payments --pattern '/payments/*'",
);
pub const RESILIENCY_SET: &str = examples!(
    "cumulo resiliency set policies.toml           the [[policy]] tables of a file (a config file will do)",
    "cumulo resiliency set policies.json           a JSON list of policies; [] removes every one",
);
pub const LOG_LEVEL: &str = examples!(
    "cumulo log-level debug                        more detail, without a restart",
    "cumulo log-level 'info,cumulo_router::routing=debug'",
);

pub const RELOAD: &str = examples!(
    "cumulo reload                                 apply the edited config file of the core running here",
    "cumulo reload -c /etc/cumulo/cumulo.toml      the admin address and token from that file",
    "kill -HUP <pid>                               the same, by signal (the outcome is in the core's log)",
    "cumulo check -c my.toml --diff                what a reload would do, changing nothing",
);

/// `cumulo new`: no admin API, so not the `examples!` tail.
pub const NEW: &str = "\
Languages: c, cpp, python, go, rust, java, javascript, ruby, php, perl, erlang,
ocaml, haskell, ats2 (the SDKs of sdk/; each service has the shape of
examples/http_req/<language>/).

Examples:
  cumulo new python hello                      ./hello/hello.py, subscribing hello/get under /hello/
  cumulo new go orders --prefix /shop/         ./orders: /shop/orders/get
  cumulo new rust hello --dir /srv/hello --sdk ~/cumulo/sdk

It prints the command that builds the service and the [[service]] lines that
run it: paste them into a core's config file (or `cumulo services add FILE`).
The service answers `hello from <name>` (with the request's value parameter);
through the gateway: curl 'http://127.0.0.1:8080/hello/hello?value=42'.";
