//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, the shard
//! channels' SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH, and PUBSUB CHANNELS/NUMSUB/NUMPAT/
//! SHARDCHANNELS/SHARDNUMSUB, with Redis's replies: one push per channel named (RESP3 `>`,
//! RESP2 an array), counting the connection's subscriptions (shard channels apart, as Redis 7
//! counts them). Messages reach subscribers through
//! their mailboxes (`pubsub.rs`); a RESP2 connection with subscriptions accepts only these
//! commands, PING and QUIT (the dispatcher checks).

use bytes::Bytes;

use super::{text, Ctx, Spec};
use crate::error::{Error, Result};
use crate::pubsub::Space;
use crate::resp::Reply;

const PUBSUB: &[&str] = &["pubsub", "noscript", "loading", "stale"];

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "subscribe", arity: -2, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Listens for messages published to channels.", handler: subscribe },
    Spec { name: "unsubscribe", arity: -1, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Stops listening to messages posted to channels.", handler: unsubscribe },
    Spec { name: "psubscribe", arity: -2, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Listens for messages published to channels that match patterns.", handler: psubscribe },
    Spec { name: "punsubscribe", arity: -1, flags: PUBSUB, keys: (0, 0, 0), group: "pubsub", summary: "Stops listening to messages published to channels that match patterns.", handler: punsubscribe },
    Spec { name: "publish", arity: 3, flags: &["pubsub", "loading", "stale", "fast"], keys: (0, 0, 0), group: "pubsub", summary: "Posts a message to a channel.", handler: publish },
    Spec { name: "ssubscribe", arity: -2, flags: PUBSUB, keys: (1, -1, 1), group: "pubsub", summary: "Listens for messages published to shard channels.", handler: ssubscribe },
    Spec { name: "sunsubscribe", arity: -1, flags: PUBSUB, keys: (1, -1, 1), group: "pubsub", summary: "Stops listening to messages posted to shard channels.", handler: sunsubscribe },
    Spec { name: "spublish", arity: 3, flags: &["pubsub", "loading", "stale", "fast"], keys: (1, 1, 1), group: "pubsub", summary: "Post a message to a shard channel", handler: spublish },
    Spec { name: "pubsub", arity: -2, flags: &["pubsub", "loading", "stale"], keys: (0, 0, 0), group: "pubsub", summary: "PUBSUB CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB, HELP.", handler: pubsub },
];

/// Commands a RESP2 connection with subscriptions may still send.
pub(crate) const ALLOWED_WHILE_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
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
    join(ctx, args, Space::Plain)
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis 7 refuses shard subscriptions inside MULTI (and scripts, by the `noscript` flag),
    // where SUBSCRIBE is queued and run.
    if ctx.session.multi.is_some() || ctx.session.in_exec {
        return Err(Error::command(
            "SSUBSCRIBE isn't allowed for a DENY BLOCKING client",
        ));
    }
    join(ctx, args, Space::Shard)
}

/// SUBSCRIBE / SSUBSCRIBE: one confirmation per channel, counting the subscriptions of its
/// kind.
fn join(ctx: &mut Ctx<'_>, args: &[Bytes], space: Space) -> Result<Reply> {
    let kind = match space {
        Space::Plain => "subscribe",
        Space::Shard => "ssubscribe",
    };
    let mut out = Vec::with_capacity(args.len() - 1);
    for channel in &args[1..] {
        ctx.session.subs.subscribe(space, channel);
        out.push(confirmation(
            kind,
            Some(channel.clone()),
            kind_count(&ctx.session.subs, space),
        ));
    }
    note_subscribed(ctx);
    Ok(Reply::Several(out))
}

/// What a (un)subscription reply counts: the connection's channels and patterns, or its
/// shard channels.
fn kind_count(subs: &crate::pubsub::Subscriptions, space: Space) -> usize {
    match space {
        Space::Plain => subs.plain_count(),
        Space::Shard => subs.shard_channels.len(),
    }
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
        c.shard_channels.store(subs.shard_channels.len(), Relaxed);
    }
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut out = Vec::with_capacity(args.len() - 1);
    for pattern in &args[1..] {
        ctx.session.subs.psubscribe(pattern);
        out.push(confirmation(
            "psubscribe",
            Some(pattern.clone()),
            ctx.session.subs.plain_count(),
        ));
    }
    note_subscribed(ctx);
    Ok(Reply::Several(out))
}

/// What an unsubscribe command leaves.
#[derive(Clone, Copy)]
enum Leaving {
    Channels,
    Patterns,
    ShardChannels,
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    leave(ctx, args, Leaving::Channels)
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    leave(ctx, args, Leaving::Patterns)
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    leave(ctx, args, Leaving::ShardChannels)
}

/// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE: the names given, or every one of its kind the
/// connection has (one confirmation each; a single one with a nil name when it has none).
fn leave(ctx: &mut Ctx<'_>, args: &[Bytes], leaving: Leaving) -> Result<Reply> {
    let (kind, space) = match leaving {
        Leaving::Channels => ("unsubscribe", Space::Plain),
        Leaving::Patterns => ("punsubscribe", Space::Plain),
        Leaving::ShardChannels => ("sunsubscribe", Space::Shard),
    };
    let subs = &mut ctx.session.subs;
    let names: Vec<Bytes> = match (args.len() > 1, leaving) {
        (true, _) => args[1..].to_vec(),
        (false, Leaving::Channels) => subs.channels.to_vec(),
        (false, Leaving::Patterns) => subs.patterns.to_vec(),
        (false, Leaving::ShardChannels) => subs.shard_channels.to_vec(),
    };
    if names.is_empty() {
        return Ok(confirmation(kind, None, kind_count(subs, space)));
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        match leaving {
            Leaving::Patterns => subs.punsubscribe(&name),
            Leaving::Channels | Leaving::ShardChannels => subs.unsubscribe(space, &name),
        };
        out.push(confirmation(kind, Some(name), kind_count(subs, space)));
    }
    note_subscribed(ctx);
    Ok(Reply::Several(out))
}

fn publish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(
        ctx.shared.pubsub.publish(&args[1], &args[2]) as i64
    ))
}

fn spublish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(
        ctx.shared.pubsub.publish_shard(&args[1], &args[2]) as i64,
    ))
}

fn pubsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = text(&args[1]).to_ascii_lowercase();
    let registry = &ctx.shared.pubsub;
    match (sub.as_str(), args.len()) {
        ("channels" | "shardchannels", 2 | 3) => {
            let space = if sub == "channels" {
                Space::Plain
            } else {
                Space::Shard
            };
            let mut names = registry.channels(space, args.get(2).map(|p| &p[..]));
            names.sort();
            Ok(Reply::Array(names.into_iter().map(Reply::Bulk).collect()))
        }
        ("numsub" | "shardnumsub", _) => {
            let space = if sub == "numsub" {
                Space::Plain
            } else {
                Space::Shard
            };
            let mut out = Vec::with_capacity(2 * (args.len() - 2));
            for c in &args[2..] {
                out.push(Reply::Bulk(c.clone()));
                out.push(Reply::Int(registry.numsub(space, c) as i64));
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
        ("numpat" | "help", _) => Err(Error::WrongArity(format!("pubsub|{sub}"))),
        ("channels" | "shardchannels", _) => Err(super::admin::sub_syntax("PUBSUB", args)),
        _ => Err(Error::UnknownSubcommand {
            container: "PUBSUB",
            sub: text(&args[1]),
        }),
    }
}
