//! Wires the parts together: binds the listeners (instances, admin API),
//! starts the services, runs the timer and keep-alive loops, and stops
//! everything on SIGTERM/SIGINT.

use crate::admin::{AdminContext, LogControl};
use anyhow::Context;
use cumulo_admin::Reloader;
use cumulo_config::Config;
use cumulo_node::supervisor::Supervisor;
use cumulo_router::{Core, Shared, Stats};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};
use tokio::task::LocalSet;

/// How long closed connections get to write what is left in their outbox
/// (the last answers and errors) before the core exits.
const FLUSH_GRACE: Duration = Duration::from_secs(1);

/// Runs the core until a signal stops it. Each shard is single-threaded (a
/// current-thread runtime), so its state needs no locks; with
/// `core.threads` > 1 shards 1.. run on threads of their own (src/shards).
pub fn run(cfg: Config) -> anyhow::Result<()> {
    run_with(cfg, LogControl::fixed("info"))
}

/// As `run`, with the handle that lets the admin API change the log level.
pub fn run_with(cfg: Config, log: LogControl) -> anyhow::Result<()> {
    // The internal services the node can run: this binary's catalogue.
    cumulo_node::catalogue::set(crate::internal::create, crate::internal::settings::CATALOGUE);
    let (tracer, exporter) = crate::traces::start(&cfg)?.unzip();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut ends = cumulo_node::shards::channels(cfg.core.threads);
    let stoppers = ends[0].peers.clone();
    let mut threads = Vec::new();
    let first = if cfg.core.threads > 1 {
        // Every shard binds the gateways' ports; the kernel spreads the
        // connections among them.
        crate::internal::share_ports_across_shards();
        for e in ends.drain(1..) {
            threads.push(cumulo_node::shards::thread::spawn(cfg.clone(), e, tracer.clone())?);
        }
        ends.pop()
    } else {
        None
    };
    let result = LocalSet::new().block_on(&rt, serve(cfg, log, first, tracer));
    // Told already when shard 0 stopped normally; not when it failed to
    // start (a socket in use): a shard that is told twice stops once.
    for tx in stoppers.iter().skip(1) {
        let _ =
            tx.blocking_send(cumulo_node::shards::Envelope { from: 0, message: cumulo_node::shards::Message::Stop });
    }
    let mut total = Stats::default();
    for t in threads {
        if let Ok(stats) = t.join() {
            total.add(&stats);
        }
    }
    // Every core is gone, and with them the recorders: what they recorded
    // last is sent before the process exits.
    if let Some(exporter) = exporter {
        exporter.flush(crate::traces::FLUSH_LIMIT);
    }
    // One line with the counters of every shard, each request once: the
    // figures `cumulo status` and /metrics show.
    result.map(|mine| {
        total.add(&mine);
        tracing::info!("stopped; {total}");
    })
}

/// Shard 0 (the only one with `core.threads` = 1): the listeners, the
/// supervisor, the admin API and the cluster.
async fn serve(
    cfg: Config,
    log: LogControl,
    shard: Option<cumulo_node::shards::Ends>,
    tracer: Option<cumulo_otlp::Recorder>,
) -> anyhow::Result<Stats> {
    let mut signals = ShutdownSignals::install();
    let reloader: Rc<std::cell::OnceCell<Rc<Reloader>>> = Rc::default();
    tokio::task::spawn_local(reload_on_hangup(reloader.clone()));
    let started = (Instant::now(), SystemTime::now());
    let socket = cfg.socket_path();
    let core = cumulo_node::runtime::new_core(&cfg, tracer.as_ref());
    drop(tracer);
    let shards = shard.map(|ends| Rc::new(cumulo_node::shards::attach(&core, ends)));
    raise_open_files_limit(cfg.core.max_connections);

    // Every listener is bound before any service starts: a socket in use is
    // one clear error, not a half-started core. So is an admin port the
    // config sets: a core that cannot be drained, scaled or watched is not
    // what its operator asked for. Only the default admin port in use
    // (another core on this machine) lets the core start without its admin
    // API, with a warning (`admin::bind`).
    let admin = crate::admin::bind(&cfg.admin)?;
    let unix =
        cumulo_node::listener::bind_unix(&socket).with_context(|| format!("cannot listen on {}", socket.display()))?;
    tokio::task::spawn_local(cumulo_node::listener::serve_unix(core.clone(), unix));
    if let Some(addr) = &cfg.core.tcp {
        let l = bind_tcp(addr, cfg.core.allow_remote).await?;
        let tls = tcp_tls(&cfg.core)?;
        let (scheme, clients) = match (&tls, &cfg.core.tcp_tls_client_ca) {
            (None, _) => ("tcp", ""),
            (Some(_), None) => ("TLS over tcp", ""),
            (Some(_), Some(_)) => ("TLS over tcp", ", client certificates required"),
        };
        tracing::info!("listening for instances ({scheme}{clients}) on tcp://{}", l.local_addr()?);
        tokio::task::spawn_local(cumulo_node::listener::serve_tcp(core.clone(), l, tls));
    }
    tokio::task::spawn_local(cumulo_node::runtime::timer_loop(core.clone()));
    tokio::task::spawn_local(cumulo_node::runtime::health_loop(core.clone()));

    let supervisor = Supervisor::new(core.clone(), cfg.base_dir.clone(), socket.display().to_string());
    if let Some(links) = &shards {
        supervisor.set_shards(links.clone());
    }
    supervisor.set_acl_groups(cfg.acl.clone());
    let hung_killer = supervisor.clone();
    tokio::task::spawn_local(cumulo_node::runtime::keepalive_loop(core.clone(), move |core, mut hung| {
        // Processes whose instance another shard closed as hung.
        hung.append(&mut core.borrow_mut().handoff_mut().hung_pids);
        hung_killer.kill_hung(&hung);
    }));
    // Internal services of the config file are tried once before anything
    // starts, so that one that cannot start (its port taken, its log file
    // unwritable) stops the core with a clear error instead of failing
    // quietly in the background.
    // The cloud's NATS, for the services that keep their state there (a
    // queue with backend = "jetstream").
    if let Some(c) = &cfg.cluster {
        crate::internal::set_cluster(c, &c.node_name(cfg.admin.port));
    }
    for (i, svc) in cfg.services.iter().enumerate() {
        if let Some(name) = &svc.internal {
            crate::internal::create(name, &svc.settings)
                .map_err(|why| anyhow::anyhow!("service[{i}] ({}): {why}", svc.prefix))?;
        }
    }
    // The cloud, when configured: other nodes' patterns join the registry
    // as they are announced; the services below start at once either way.
    let cluster = match &cfg.cluster {
        Some(c) => Some(cumulo_cluster::start(c, c.node_name(cfg.admin.port), core.clone()).await?),
        None => None,
    };
    let started_ids = supervisor.start_all(&cfg.services);
    let reload = Rc::new(Reloader::new(cfg.file.clone(), supervisor.clone(), cfg.clone(), started_ids));
    let _ = reloader.set(reload.clone());
    let admin_task = admin.map(|listener| {
        let ctx = AdminContext {
            reloader: reload.clone(),
            core: core.clone(),
            supervisor: supervisor.clone(),
            log: Rc::new(log),
            auth: crate::admin::Guard::new(cfg.admin.tokens.clone()),
            shards: shards.clone(),
            cluster: cluster.as_ref().map(|c| c.membership()),
            started: started.0,
            started_at: started.1,
        };
        tokio::task::spawn_local(crate::admin::serve(listener, Rc::new(ctx)))
    });
    tracing::info!(
        "cumulo {} ready: {} services, instances connect to {}",
        env!("CARGO_PKG_VERSION"),
        cfg.services.len(),
        socket.display()
    );

    let why = signals.recv().await;
    tracing::info!("{why}: shutting down (stopping services, failing queued requests)");
    if let Some(t) = admin_task {
        t.abort();
    }
    let terminate_ms = supervisor.max_terminate_timeout();
    core.borrow_mut().begin_shutdown(terminate_ms);
    if let Some(s) = &shards {
        s.stop_others();
    }
    // Processes finish what they hold (or are stopped); answers to requests
    // held by unmanaged instances get the same time.
    let drained = wait_until(&core, |c| c.in_flight() == 0, Duration::from_millis(terminate_ms as u64));
    tokio::join!(supervisor.stop_all(), drained);
    core.borrow_mut().finish_shutdown();
    wait_until(&core, |c| c.open_connections() == 0, FLUSH_GRACE).await;
    if let Some(c) = &cluster {
        c.leave().await;
    }
    let _ = std::fs::remove_file(&socket);
    let stats = cumulo_node::shards::report::snapshot(&core.borrow(), 0, &[]).stats;
    Ok(stats)
}

/// Every connection is a descriptor: the soft limit on open files (often
/// 1024) is raised as far as the hard limit allows, and the figure logged,
/// with a warning when `max_connections` cannot be reached under it. When
/// descriptors run out anyway, the accept loops back off (listener.rs).
fn raise_open_files_limit(max_connections: u32) {
    let before = rlimit::Resource::NOFILE.get().map(|(soft, _)| soft).unwrap_or(0);
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(now) if now > before => tracing::info!("open files limit raised from {before} to {now}"),
        Ok(now) => tracing::info!("open files limit: {now}"),
        Err(e) => tracing::warn!("cannot read or raise the open files limit: {e}"),
    }
    let now = rlimit::Resource::NOFILE.get().map(|(soft, _)| soft).unwrap_or(0);
    if now < max_connections as u64 + 32 {
        tracing::warn!(
            "open files limit {now} is below core.max_connections ({max_connections}) plus the core's own files: \
             connections past it wait in the listen queue until others close (raise ulimit -n)"
        );
    }
}

/// Polls the state until `done` holds or `limit` passes (shutdown only).
async fn wait_until(core: &Shared, done: impl Fn(&Core) -> bool, limit: Duration) {
    let end = Instant::now() + limit;
    while !done(&core.borrow()) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What `cumulo check` adds to the config's own checks: the files the core
/// loads at its start (the TCP listener's certificate, key and client CAs).
pub fn check(cfg: &Config) -> anyhow::Result<()> {
    tcp_tls(&cfg.core).map(drop)
}

/// The TCP listener's TLS, when `core.tcp_tls_cert` is set: loaded now, so
/// that a certificate that does not load stops the start.
fn tcp_tls(c: &cumulo_config::CoreConfig) -> anyhow::Result<Option<cumulo_tls::Tls>> {
    let (Some(cert), Some(key)) = (&c.tcp_tls_cert, &c.tcp_tls_key) else { return Ok(None) };
    let files = cumulo_tls::Files { cert: cert.clone(), key: key.clone(), listener: cumulo_tls::Listener::Tcp };
    cumulo_tls::Tls::new(files, c.tcp_tls_client_ca.as_deref()).map(Some).map_err(anyhow::Error::msg)
}

async fn bind_tcp(addr: &str, allow_remote: bool) -> anyhow::Result<tokio::net::TcpListener> {
    let l = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on tcp {addr}"))?;
    let local = l.local_addr()?;
    if !local.ip().is_loopback() && !allow_remote {
        anyhow::bail!("core.tcp = {addr} is not a loopback address; set core.allow_remote = true to accept instances from other hosts");
    }
    Ok(l)
}

/// SIGHUP: the config file is applied again (`reload.rs`; once the core
/// has started its services) and every TLS listener reloads its
/// certificate and key files (the watchers also reload on their own when
/// the files change). Caught from the start of `serve`, so that it never
/// kills the core.
async fn reload_on_hangup(reloader: Rc<std::cell::OnceCell<Rc<Reloader>>>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the config file and the TLS certificates");
        cumulo_tls::request_reload();
        match reloader.get() {
            // Its outcome is logged by `reload` itself.
            Some(r) => drop(r.reload().await),
            None => tracing::warn!("SIGHUP before the services started: the config file is not reloaded"),
        }
    }
}

/// SIGTERM and SIGINT, caught from the start of `serve`: a signal that
/// comes while the core is still starting (its socket already bound, so a
/// client or a test may already send it) waits for the start to finish and
/// then shuts the core down cleanly, instead of killing it by the default
/// action.
struct ShutdownSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    fn install() -> ShutdownSignals {
        use tokio::signal::unix::{signal, SignalKind};
        ShutdownSignals {
            term: signal(SignalKind::terminate()).expect("SIGTERM handler"),
            int: signal(SignalKind::interrupt()).expect("SIGINT handler"),
        }
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
