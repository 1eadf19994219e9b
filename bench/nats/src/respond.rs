//! The responder: one connection, one subscription, a fixed answer.

use futures_util::StreamExt;

#[derive(clap::Args)]
pub struct RespondArgs {
    /// The NATS server to connect to.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub server: String,
    /// The subject to answer on.
    #[arg(long, default_value = "bench.reqrep")]
    pub subject: String,
    /// The body of every answer (default: the http_req example's answer to value=42).
    #[arg(long, default_value = "<http_test><value>42</value></http_test>")]
    pub response: String,
}

pub async fn run(args: RespondArgs) -> anyhow::Result<()> {
    let client = async_nats::connect(&args.server).await?;
    let mut requests = client.subscribe(args.subject.clone()).await?;
    // The subscription is known to the server once this flush returns: only
    // then may the requester be told to start.
    client.flush().await?;
    println!("ready: answering on {} at {}", args.subject, args.server);
    let response = bytes::Bytes::from(args.response.into_bytes());
    loop {
        tokio::select! {
            message = requests.next() => {
                let Some(message) = message else { break };
                if let Some(reply) = message.reply {
                    client.publish(reply, response.clone()).await?;
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(())
}
