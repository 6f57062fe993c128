//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB
//! CHANNELS/NUMSUB/NUMPAT, with Redis's replies: one push per channel named (RESP3 `>`, RESP2
//! an array), counting the connection's subscriptions. Messages reach subscribers through
//! their mailboxes (`pubsub.rs`); a RESP2 connection with subscriptions accepts only these
//! commands, PING and QUIT (the dispatcher checks).

use bytes::Bytes;

use super::{text, Ctx, Spec};
use crate::error::{Error, Result};
use crate::resp::Reply;

const PUBSUB: &[&str] = &["pubsub", "noscript", "loading", "stale"];

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "subscribe", arity: -2, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Listens for messages published to channels.", handler: subscribe },
    Spec { name: "unsubscribe", arity: -1, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Stops listening to messages posted to channels.", handler: unsubscribe },
    Spec { name: "psubscribe", arity: -2, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Listens for messages published to channels that match patterns.", handler: psubscribe },
    Spec { name: "punsubscribe", arity: -1, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Stops listening to messages published to channels that match patterns.", handler: punsubscribe },
    Spec { name: "publish", arity: 3, flags: &["pubsub", "loading", "stale", "fast"], keys: (0, 0, 0), group: "pubsub", summary: "Posts a message to a channel.", handler: publish },
    Spec { name: "pubsub", arity: -2, flags: &["pubsub", "loading", "stale"], keys: (0, 0, 0), group: "pubsub", summary: "PUBSUB CHANNELS, NUMSUB, NUMPAT, HELP.", handler: pubsub },
];

/// Commands a RESP2 connection with subscriptions may still send.
pub(crate) const ALLOWED_WHILE_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ping",
    "quit",
    "reset",
];

fn confirmation(kind: &'static str, name: Option<Bytes>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk(kind),
        Reply::bulk_or_nil(name),
        Reply::Int(count as i64),
    ])
}

fn subscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut out = Vec::with_capacity(args.len() - 1);
    for channel in &args[1..] {
        ctx.session.subs.subscribe(channel);
        out.push(confirmation(
            "subscribe",
            Some(channel.clone()),
            ctx.session.subs.count(),
        ));
    }
    note_subscribed(ctx);
    Ok(Reply::Several(out))
}

/// Tells the client registry whether this connection listens to anything now (CLIENT LIST's
/// TYPE filter).
fn note_subscribed(ctx: &Ctx<'_>) {
    use std::sync::atomic::Ordering::Relaxed;
    if let Some(c) = &ctx.session.control {
        let subs = &ctx.session.subs;
        c.subscribed.store(subs.count() > 0, Relaxed);
        c.channels.store(subs.channels.len(), Relaxed);
        c.patterns.store(subs.patterns.len(), Relaxed);
    }
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut out = Vec::with_capacity(args.len() - 1);
    for pattern in &args[1..] {
        ctx.session.subs.psubscribe(pattern);
        out.push(confirmation(
            "psubscribe",
            Some(pattern.clone()),
            ctx.session.subs.count(),
        ));
    }
    note_subscribed(ctx);
    Ok(Reply::Several(out))
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    leave(ctx, args, false)
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    leave(ctx, args, true)
}

/// UNSUBSCRIBE / PUNSUBSCRIBE: the names given, or every one the connection has (one
/// confirmation each; a single one with a nil name when it has none).
fn leave(ctx: &mut Ctx<'_>, args: &[Bytes], patterns: bool) -> Result<Reply> {
    let kind = if patterns {
        "punsubscribe"
    } else {
        "unsubscribe"
    };
    let subs = &mut ctx.session.subs;
    let names: Vec<Bytes> = match (args.len() > 1, patterns) {
        (true, _) => args[1..].to_vec(),
        (false, false) => subs.channels.to_vec(),
        (false, true) => subs.patterns.to_vec(),
    };
    if names.is_empty() {
        return Ok(confirmation(kind, None, subs.count()));
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        if patterns {
            subs.punsubscribe(&name);
        } else {
            subs.unsubscribe(&name);
        }
        out.push(confirmation(kind, Some(name), subs.count()));
    }
    note_subscribed(ctx);
    Ok(Reply::Several(out))
}

fn publish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(
        ctx.shared.pubsub.publish(&args[1], &args[2]) as i64
    ))
}

fn pubsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = text(&args[1]).to_ascii_lowercase();
    let registry = &ctx.shared.pubsub;
    match (sub.as_str(), args.len()) {
        ("channels", 2 | 3) => {
            let mut names = registry.channels(args.get(2).map(|p| &p[..]));
            names.sort();
            Ok(Reply::Array(names.into_iter().map(Reply::Bulk).collect()))
        }
        ("numsub", _) => {
            let mut out = Vec::with_capacity(2 * (args.len() - 2));
            for c in &args[2..] {
                out.push(Reply::Bulk(c.clone()));
                out.push(Reply::Int(registry.numsub(c) as i64));
            }
            Ok(Reply::Array(out))
        }
        ("numpat", 2) => Ok(Reply::Int(registry.numpat() as i64)),
        ("help", 2) => Ok(Reply::Array(
            [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|l| Reply::Simple((*l).into()))
            .collect(),
        )),
        _ => Err(Error::UnknownSubcommand {
            container: "PUBSUB",
            sub: text(&args[1]),
        }),
    }
}
