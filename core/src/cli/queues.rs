//! `cumulo queues`: the queue services of a running core, and their dead
//! letters (list, replay, purge).

use super::{call, client, pretty, table, AdminArgs, Outcome};
use clap::Subcommand;
use hyper::Method;

#[derive(Subcommand, Debug, Clone)]
pub enum QueuesCommand {
    /// Every queue: depth, in flight, delivered, redelivered, dead letters,
    /// bytes on disk, age of the oldest request (the default).
    #[command(after_help = super::help::QUEUES_LIST)]
    List,
    /// A queue's dead letters, oldest first, with each attempt's status.
    #[command(after_help = super::help::QUEUES_DEAD)]
    Dead {
        /// The queue's prefix (needed when several queues run).
        #[arg(long)]
        queue: Option<String>,
        /// List at most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Send a queue's dead letters again, with fresh attempts.
    #[command(after_help = super::help::QUEUES_REPLAY)]
    Replay {
        /// The queue's prefix (needed when several queues run).
        #[arg(long)]
        queue: Option<String>,
    },
    /// Forget a queue's dead letters.
    #[command(after_help = super::help::QUEUES_PURGE)]
    Purge {
        /// The queue's prefix (needed when several queues run).
        #[arg(long)]
        queue: Option<String>,
    },
}

fn query(queue: &Option<String>) -> String {
    match queue {
        Some(q) => format!("?queue={}", percent_encoding::utf8_percent_encode(q, percent_encoding::NON_ALPHANUMERIC)),
        None => String::new(),
    }
}

pub fn queues(a: &AdminArgs, cmd: Option<QueuesCommand>) -> Outcome {
    let c = client(a)?;
    let s = table::cell;
    match cmd.unwrap_or(QueuesCommand::List) {
        QueuesCommand::List => {
            let v = call(&c, Method::GET, "/v1/queues", None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            let empty = vec![];
            let list = v["queues"].as_array().unwrap_or(&empty);
            if list.is_empty() {
                return Ok("no queues (a service with internal = \"queue\")\n".into());
            }
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|q| {
                    let age = match q["oldest_age_ms"].as_u64() {
                        Some(ms) => format!("{:.1} s", ms as f64 / 1000.0),
                        None => "-".into(),
                    };
                    vec![
                        s(&q["prefix"]),
                        s(&q["mode"]),
                        s(&q["sync"]),
                        s(&q["depth"]),
                        s(&q["in_flight"]),
                        s(&q["delivered"]),
                        s(&q["redelivered"]),
                        s(&q["dead_letters"]),
                        s(&q["bytes_on_disk"]),
                        age,
                    ]
                })
                .collect();
            Ok(table::render(
                &[
                    "QUEUE",
                    "MODE",
                    "SYNC",
                    "DEPTH",
                    "IN_FLIGHT",
                    "DELIVERED",
                    "REDELIVERED",
                    "DEAD",
                    "DISK_BYTES",
                    "OLDEST",
                ],
                &rows,
            ))
        }
        QueuesCommand::Dead { queue, limit } => {
            let mut q = query(&queue);
            q.push_str(if q.is_empty() { "?" } else { "&" });
            let v = call(&c, Method::GET, &format!("/v1/queues/dead-letters{q}limit={limit}"), None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            let empty = vec![];
            let list = v["dead_letters"].as_array().unwrap_or(&empty);
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|d| {
                    let history = d["history"]
                        .as_array()
                        .map(|h| h.iter().map(|f| format!("{}:{}", f["attempt"], s(&f["status"]))).collect::<Vec<_>>())
                        .unwrap_or_default()
                        .join(" ");
                    vec![s(&d["id"]), s(&d["destination"]), s(&d["attempts"]), s(&d["bytes"]), history]
                })
                .collect();
            Ok(format!("{} dead letters in {}\n", v["total"], s(&v["prefix"]))
                + &table::render(&["ID", "DESTINATION", "ATTEMPTS", "BYTES", "HISTORY"], &rows))
        }
        QueuesCommand::Replay { queue } => {
            let v = call(&c, Method::POST, &format!("/v1/queues/replay{}", query(&queue)), None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            Ok(format!("{}: replaying {} dead letters\n", s(&v["prefix"]), v["replayed"]))
        }
        QueuesCommand::Purge { queue } => {
            let v = call(&c, Method::POST, &format!("/v1/queues/purge{}", query(&queue)), None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            Ok(format!("{}: purged {} dead letters\n", s(&v["prefix"]), v["purged"]))
        }
    }
}
