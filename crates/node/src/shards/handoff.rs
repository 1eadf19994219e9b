//! Service connections handed from shard 0 to the shard that serves them:
//! the orders carried between shards and the serving of an adopted
//! connection. The table of who serves what, and the orders themselves, are
//! the router's (`cumulo_router::shards::handoff`).

pub use cumulo_router::shards::handoff::*;

use super::{Envelope, Message};
use cumulo_router::Shared;
use std::rc::Rc;
use tokio::sync::mpsc;

/// Sends the orders shard `me` makes, in the order it made them.
pub(super) async fn send_orders(core: Shared, me: u32, peers: Vec<mpsc::Sender<Envelope>>) {
    let wake = core.borrow().handoff().wake();
    loop {
        wake.notified().await;
        let orders = core.borrow_mut().handoff_mut().take_orders();
        for (to, order) in orders {
            let Some(tx) = peers.get(to as usize) else { continue };
            if tx.send(Envelope { from: me, message: Message::Order(order) }).await.is_err() {
                return; // that shard's thread has ended: the core is stopping
            }
        }
    }
}

/// Carries out an order of shard 0 (its inbox: `reply`).
pub(super) fn apply(core: &Shared, order: Order, reply: mpsc::Sender<Envelope>) {
    match order {
        Order::Adopt(a) => {
            tokio::task::spawn_local(serve_adopted(core.clone(), *a, reply));
        }
        Order::Retire { ids, terminate_ms, why } => core.borrow_mut().retire_instances(&ids, terminate_ms, &why),
        Order::Options { service, options } => core.borrow_mut().set_service_options(service, &Rc::new(options)),
    }
}

/// Serves a connection handed over by shard 0 until it ends, then tells
/// shard 0 it is gone.
async fn serve_adopted(core: Shared, a: Adoption, reply: mpsc::Sender<Envelope>) {
    let id = a.id;
    let hung = match crate::listener::serve_handed(&core, a).await {
        Ok(hung) => hung,
        Err(why) => {
            tracing::warn!(
                instance = id,
                "shard {}: cannot serve a connection handed over: {why}",
                core.borrow().shard().index
            );
            false
        }
    };
    let me = core.borrow().shard().index;
    let _ = reply.send(Envelope { from: me, message: Message::Gone { id, hung } }).await;
}
