//! What a user would pick instead of cumulo's queue: a JetStream work-queue
//! stream (retention WorkQueue, file storage, one replica) with a durable
//! pull consumer acking each message explicitly.
//!
//! `--senders` publishers, each on a NATS connection of its own, keep
//! `--in-flight` publishes waiting for their publish acks (the stream
//! stored the message: the figure comparable to the queue's
//! acknowledgement); one consumer, on its own connection, fetches in
//! batches and acks every message (what the queue's delivery does). The
//! latency is from the publish to its ack.
//!
//! How durable an ack is depends on the server: JetStream acks once the
//! message is in its file store, and fsyncs that store every
//! `sync_interval` (2 minutes by default; `sync_interval: always` from
//! nats-server 2.10 on). bench/queue/run says which one it ran.

use crate::{latency_fields, new_histogram, record, Load, Window};
use anyhow::Context;
use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct JetStreamArgs {
    #[command(flatten)]
    pub load: Load,
    /// The NATS server (with JetStream enabled).
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub url: String,
    /// The stream, created afresh (an existing one of that name is deleted).
    #[arg(long, default_value = "QUEUEBENCH")]
    pub stream: String,
    /// The subject published to (the stream's only subject).
    #[arg(long, default_value = "queuebench.sink")]
    pub subject: String,
    /// Messages the consumer asks for in one fetch.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Threads of the tokio runtime (0: one per CPU, tokio's default).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// The wait for a publish ack or an API answer, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
}

/// What one publisher saw in the measured window.
struct Published {
    latency: Histogram<u64>,
    acked: u64,
    errors: BTreeMap<String, u64>,
}

pub fn run(args: JetStreamArgs) -> anyhow::Result<()> {
    args.load.check()?;
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1");
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if args.threads > 0 {
        runtime.worker_threads(args.threads);
    }
    runtime.enable_all().build()?.block_on(measure(args))
}

async fn connect(args: &JetStreamArgs) -> anyhow::Result<jetstream::Context> {
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(Duration::from_millis(args.timeout_ms)))
        .connect(&args.url)
        .await
        .with_context(|| format!("cannot connect to {}", args.url))?;
    Ok(jetstream::ContextBuilder::new().timeout(Duration::from_millis(args.timeout_ms)).build(client))
}

async fn measure(args: JetStreamArgs) -> anyhow::Result<()> {
    let admin = connect(&args).await?;
    // A fresh stream: nothing of an earlier run left to consume.
    if admin.get_stream(&args.stream).await.is_ok() {
        admin.delete_stream(&args.stream).await.context("cannot delete the stream of an earlier run")?;
    }
    let stream = admin
        .create_stream(stream::Config {
            name: args.stream.clone(),
            subjects: vec![args.subject.clone()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            num_replicas: 1,
            ..Default::default()
        })
        .await
        .context("cannot create the stream (is JetStream enabled: nats-server -js?)")?;
    let consumer: consumer::PullConsumer = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("sink".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .context("cannot create the consumer")?;

    let window = args.load.window();
    let consuming = tokio::spawn(consume(consumer, args.batch, window));
    let body = Bytes::from(args.load.body_bytes());
    let mut publishers = Vec::with_capacity(args.load.senders);
    for _ in 0..args.load.senders {
        // A connection per publisher, as the queue's client has.
        let context = connect(&args).await?;
        publishers.push(tokio::spawn(publish(
            context,
            args.subject.clone(),
            body.clone(),
            args.load.in_flight,
            window,
        )));
    }
    let mut latency = new_histogram();
    let mut acked = 0;
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for publisher in publishers {
        let one = publisher.await??;
        latency.add(&one.latency)?;
        acked += one.acked;
        for (e, n) in one.errors {
            *errors.entry(e).or_default() += n;
        }
    }
    let consumed = consuming.await??;
    let seconds = window.seconds();
    let error_count: u64 = errors.values().sum();
    println!(
        "jetstream acked={acked} errors={error_count} seconds={seconds:.3} acked_per_s={:.1} {} consumed={consumed} \
         consumed_per_s={:.1} senders={} in_flight={} body={} batch={} url={}",
        acked as f64 / seconds,
        latency_fields(&latency),
        consumed as f64 / seconds,
        args.load.senders,
        args.load.in_flight,
        args.load.body,
        args.batch,
        args.url,
    );
    for (e, n) in &errors {
        eprintln!("queue-bench jetstream: {n} x {e}");
    }
    anyhow::ensure!(acked > 0, "no publish was acknowledged in the measured window");
    Ok(())
}

/// One publisher: `in_flight` publishes awaiting their acks until the
/// window ends, then the rest of its acks.
async fn publish(
    context: jetstream::Context,
    subject: String,
    body: Bytes,
    in_flight: usize,
    window: Window,
) -> anyhow::Result<Published> {
    let mut out = Published { latency: new_histogram(), acked: 0, errors: BTreeMap::new() };
    let mut waiting = FuturesUnordered::new();
    loop {
        while Instant::now() < window.until && waiting.len() < in_flight {
            let since = Instant::now();
            match context.publish(subject.clone(), body.clone()).await {
                Ok(ack) => waiting.push(async move { (since, ack.await) }),
                Err(e) => *out.errors.entry(e.to_string()).or_default() += 1,
            }
        }
        let Some((since, ack)) = waiting.next().await else { break };
        let now = Instant::now();
        if !window.contains(now) {
            continue;
        }
        match ack {
            Ok(_) => {
                record(&mut out.latency, now - since);
                out.acked += 1;
            }
            Err(e) => *out.errors.entry(e.to_string()).or_default() += 1,
        }
    }
    Ok(out)
}

/// The consumer: fetches up to `batch` messages at a time and acks each,
/// until the window ends; returns how many it acked in the window.
async fn consume(consumer: consumer::PullConsumer, batch: usize, window: Window) -> anyhow::Result<u64> {
    let mut consumed = 0;
    while Instant::now() < window.until {
        let mut messages = consumer
            .batch()
            .max_messages(batch)
            .expires(Duration::from_millis(100))
            .messages()
            .await
            .context("fetch")?;
        while let Some(message) = messages.next().await {
            let message = message.map_err(|e| anyhow::anyhow!("fetch: {e}"))?;
            message.ack().await.map_err(|e| anyhow::anyhow!("ack: {e}"))?;
            if window.contains(Instant::now()) {
                consumed += 1;
            }
        }
    }
    Ok(consumed)
}
