//! Pub/Sub, in memory as in Redis: who listens to which channel, pattern or shard channel, and
//! delivery of published messages to each subscriber's connection. Shard channels (SSUBSCRIBE,
//! SPUBLISH, Redis 7) are a namespace of their own: a message published to one reaches its
//! shard subscribers only, never a plain channel's or a pattern's, and in cluster mode the
//! channel name routes like a key. A connection owns a mailbox (an
//! unbounded channel read by its task in `conn.rs`, bounded here in bytes: a subscriber that
//! lets [`QUEUE_BYTES_MAX`] pile up is disconnected, as Redis's `client-output-buffer-limit
//! pubsub` does) and a [`Subscriptions`] in its session, which leaves the registry when the
//! connection ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::glob;
use crate::state::lock;

/// Most bytes of messages waiting for one subscriber (Redis's pubsub hard limit, 32 MB).
pub(crate) const QUEUE_BYTES_MAX: usize = 32 << 20;

/// What a connection's mailbox carries: a published message on its way to one subscriber, or
/// a MONITOR line (`watchers.rs`).
#[derive(Debug, Clone)]
pub(crate) enum Message {
    Published {
        /// The pattern that matched (PSUBSCRIBE), if delivered through one.
        pattern: Option<Bytes>,
        /// Published to a shard channel (SPUBLISH): the subscriber gets `smessage`.
        shard: bool,
        channel: Bytes,
        payload: Bytes,
    },
    Monitor(Bytes),
    /// A client-side caching message (`tracking.rs`); `redirected`: for another connection's
    /// tracking (CLIENT TRACKING ... REDIRECT).
    Tracking {
        push: crate::tracking::Push,
        redirected: bool,
    },
}

/// What a queued message costs beyond its bytes: its queue slot, the handles to its bytes and
/// the reply's framing (counted so that empty messages also fill the bound).
pub(crate) const MESSAGE_OVERHEAD_BYTES: usize = 96;

impl Message {
    /// The bytes it holds while queued, as counted against [`QUEUE_BYTES_MAX`].
    pub fn bytes(&self) -> usize {
        MESSAGE_OVERHEAD_BYTES
            + match self {
                Message::Published {
                    pattern,
                    channel,
                    payload,
                    ..
                } => channel.len() + payload.len() + pattern.as_ref().map_or(0, Bytes::len),
                Message::Monitor(line) => line.len(),
                Message::Tracking { push, .. } => push.bytes(),
            }
    }
}

/// One connection's delivery end.
#[derive(Debug, Clone)]
pub(crate) struct Mailbox {
    client: u64,
    tx: mpsc::UnboundedSender<Message>,
    /// Bytes queued and not yet written to the socket.
    pub queued_bytes: Arc<AtomicUsize>,
    /// Set when the queue passed its bound: the connection closes.
    pub overflowed: Arc<AtomicBool>,
}

impl Mailbox {
    /// A mailbox for `client` and the receiving end its connection reads.
    pub fn new(client: u64) -> (Mailbox, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Mailbox {
                client,
                tx,
                queued_bytes: Arc::default(),
                overflowed: Arc::default(),
            },
            rx,
        )
    }

    /// Queues `m`; false when it was not delivered (the connection is gone or over its bound).
    pub fn deliver(&self, m: Message) -> bool {
        let n = m.bytes();
        if self.queued_bytes.fetch_add(n, Ordering::AcqRel) + n > QUEUE_BYTES_MAX {
            self.queued_bytes.fetch_sub(n, Ordering::AcqRel);
            self.overflowed.store(true, Ordering::Release);
            return false;
        }
        if self.tx.send(m).is_err() {
            self.queued_bytes.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        true
    }
}

/// Every subscription of the server.
#[derive(Default)]
pub(crate) struct PubSub {
    channels: Mutex<HashMap<Bytes, Vec<Mailbox>>>,
    patterns: Mutex<Vec<(Bytes, Mailbox)>>,
    shard_channels: Mutex<HashMap<Bytes, Vec<Mailbox>>>,
}

/// Which of the two channel namespaces a name lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// SUBSCRIBE / PUBLISH.
    Plain,
    /// SSUBSCRIBE / SPUBLISH.
    Shard,
}

impl PubSub {
    /// What `client` listens to: its channels and shard channels (the shard ones flagged), and
    /// its patterns.
    pub fn subscriptions_of(&self, client: u64) -> (Vec<(Bytes, bool)>, Vec<Bytes>) {
        let mut channels = Vec::new();
        for (space, map) in [(false, &self.channels), (true, &self.shard_channels)] {
            for (name, subs) in lock(map).iter() {
                if subs.iter().any(|m| m.client == client) {
                    channels.push((name.clone(), space));
                }
            }
        }
        let patterns = lock(&self.patterns)
            .iter()
            .filter(|(_, m)| m.client == client)
            .map(|(p, _)| p.clone())
            .collect();
        (channels, patterns)
    }

    /// Delivers `payload` to the subscribers of `channel` and of matching patterns; returns how
    /// many received it (Redis counts a client once per matching subscription).
    pub fn publish(&self, channel: &Bytes, payload: &Bytes) -> usize {
        let mut n = 0;
        if let Some(subs) = lock(&self.channels).get(channel) {
            for s in subs {
                let m = Message::Published {
                    pattern: None,
                    shard: false,
                    channel: channel.clone(),
                    payload: payload.clone(),
                };
                n += usize::from(s.deliver(m));
            }
        }
        for (pattern, s) in lock(&self.patterns).iter() {
            if glob::matches(pattern, channel, false) {
                let m = Message::Published {
                    pattern: Some(pattern.clone()),
                    shard: false,
                    channel: channel.clone(),
                    payload: payload.clone(),
                };
                n += usize::from(s.deliver(m));
            }
        }
        n
    }

    /// Delivers `payload` to the subscribers of shard channel `channel` (patterns do not see
    /// shard channels); returns how many received it.
    pub fn publish_shard(&self, channel: &Bytes, payload: &Bytes) -> usize {
        let subs = lock(&self.shard_channels);
        let Some(subs) = subs.get(channel) else {
            return 0;
        };
        subs.iter()
            .filter(|s| {
                s.deliver(Message::Published {
                    pattern: None,
                    shard: true,
                    channel: channel.clone(),
                    payload: payload.clone(),
                })
            })
            .count()
    }

    fn space(&self, space: Space) -> &Mutex<HashMap<Bytes, Vec<Mailbox>>> {
        match space {
            Space::Plain => &self.channels,
            Space::Shard => &self.shard_channels,
        }
    }

    /// Channels of `space` with at least one subscriber, optionally matching `pattern`.
    pub fn channels(&self, space: Space, pattern: Option<&[u8]>) -> Vec<Bytes> {
        lock(self.space(space))
            .iter()
            .filter(|(c, subs)| {
                !subs.is_empty() && pattern.is_none_or(|p| glob::matches(p, c, false))
            })
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Subscribers of `channel` in `space`.
    pub fn numsub(&self, space: Space, channel: &[u8]) -> usize {
        lock(self.space(space)).get(channel).map_or(0, Vec::len)
    }

    /// Channels, distinct patterns and shard channels with subscribers (INFO's
    /// `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`).
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            lock(&self.channels).len(),
            self.numpat(),
            lock(&self.shard_channels).len(),
        )
    }

    /// Pattern subscriptions, counted once per distinct pattern (as Redis does).
    pub fn numpat(&self) -> usize {
        let patterns = lock(&self.patterns);
        let mut distinct: Vec<&Bytes> = patterns.iter().map(|(p, _)| p).collect();
        distinct.sort();
        distinct.dedup();
        distinct.len()
    }
}

/// A connection's channel or pattern names: a list (UNSUBSCRIBE without names answers for each)
/// with a hash index, so that subscribing to or leaving one of a million names is O(1) (a list
/// searched per name made `SUBSCRIBE c1 ... c1000000` quadratic). Removal moves the last name
/// into the gap: the order is not kept, as Redis's (a dict's) is not either.
#[derive(Debug, Default)]
pub(crate) struct Names {
    list: Vec<Bytes>,
    at: HashMap<Bytes, usize>,
}

impl Names {
    /// Adds `name`; false if it was there.
    fn insert(&mut self, name: &Bytes) -> bool {
        if self.at.contains_key(name) {
            return false;
        }
        self.at.insert(name.clone(), self.list.len());
        self.list.push(name.clone());
        true
    }

    /// Removes `name`; false if it was not there.
    fn remove(&mut self, name: &[u8]) -> bool {
        let Some(i) = self.at.remove(name) else {
            return false;
        };
        self.list.swap_remove(i);
        if let Some(moved) = self.list.get(i) {
            self.at.insert(moved.clone(), i);
        }
        true
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// The names, as a list.
    pub fn to_vec(&self) -> Vec<Bytes> {
        self.list.clone()
    }

    fn into_vec(self) -> Vec<Bytes> {
        self.list
    }
}

/// One connection's subscriptions; leaves the registry when dropped.
pub(crate) struct Subscriptions {
    registry: Arc<PubSub>,
    mailbox: Mailbox,
    /// The channels, patterns and shard channels this connection listens to.
    pub channels: Names,
    pub patterns: Names,
    pub shard_channels: Names,
}

impl Subscriptions {
    pub fn new(registry: Arc<PubSub>, mailbox: Mailbox) -> Self {
        Subscriptions {
            registry,
            mailbox,
            channels: Names::default(),
            patterns: Names::default(),
            shard_channels: Names::default(),
        }
    }

    /// This connection's mailbox (MONITOR delivers through it too).
    pub fn mailbox(&self) -> Mailbox {
        self.mailbox.clone()
    }

    /// Subscriptions of every kind: a RESP2 connection with any is in subscribed mode.
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard_channels.len()
    }

    /// Channel and pattern subscriptions (what SUBSCRIBE and PSUBSCRIBE replies count; Redis 7
    /// counts shard channels apart).
    pub fn plain_count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    fn names_mut(&mut self, space: Space) -> &mut Names {
        match space {
            Space::Plain => &mut self.channels,
            Space::Shard => &mut self.shard_channels,
        }
    }

    /// Subscribes to `channel` of `space`; false if already subscribed.
    pub fn subscribe(&mut self, space: Space, channel: &Bytes) -> bool {
        if !self.names_mut(space).insert(channel) {
            return false;
        }
        lock(self.registry.space(space))
            .entry(channel.clone())
            .or_default()
            .push(self.mailbox.clone());
        true
    }

    /// Unsubscribes from `channel` of `space`; false if not subscribed.
    pub fn unsubscribe(&mut self, space: Space, channel: &[u8]) -> bool {
        if !self.names_mut(space).remove(channel) {
            return false;
        }
        self.leave_channel(space, channel);
        true
    }

    /// Takes this connection's mailbox off `channel` of `space` in the registry.
    fn leave_channel(&self, space: Space, channel: &[u8]) {
        let mut channels = lock(self.registry.space(space));
        if let Some(subs) = channels.get_mut(channel) {
            subs.retain(|m| m.client != self.mailbox.client);
            if subs.is_empty() {
                channels.remove(channel);
            }
        }
    }

    /// Leaves every channel, pattern and shard channel (RESET, and the end of the
    /// connection).
    pub fn clear(&mut self) {
        for c in std::mem::take(&mut self.channels).into_vec() {
            self.leave_channel(Space::Plain, &c);
        }
        for c in std::mem::take(&mut self.shard_channels).into_vec() {
            self.leave_channel(Space::Shard, &c);
        }
        if std::mem::take(&mut self.patterns).len() > 0 {
            lock(&self.registry.patterns).retain(|(_, m)| m.client != self.mailbox.client);
        }
    }

    /// Subscribes to `pattern`; false if already subscribed.
    pub fn psubscribe(&mut self, pattern: &Bytes) -> bool {
        if !self.patterns.insert(pattern) {
            return false;
        }
        lock(&self.registry.patterns).push((pattern.clone(), self.mailbox.clone()));
        true
    }

    /// Unsubscribes from `pattern`; false if not subscribed.
    pub fn punsubscribe(&mut self, pattern: &[u8]) -> bool {
        if !self.patterns.remove(pattern) {
            return false;
        }
        lock(&self.registry.patterns)
            .retain(|(p, m)| !(m.client == self.mailbox.client && p == pattern));
        true
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn messages_reach_channel_and_pattern_subscribers_until_they_leave() {
        let registry = Arc::new(PubSub::default());
        let (mb1, mut rx1) = Mailbox::new(1);
        let (mb2, mut rx2) = Mailbox::new(2);
        let mut s1 = Subscriptions::new(registry.clone(), mb1);
        let mut s2 = Subscriptions::new(registry.clone(), mb2);
        assert!(s1.subscribe(Space::Plain, &Bytes::from_static(b"news")));
        assert!(!s1.subscribe(Space::Plain, &Bytes::from_static(b"news")));
        assert!(s2.psubscribe(&Bytes::from_static(b"n*")));
        let n = registry.publish(&Bytes::from_static(b"news"), &Bytes::from_static(b"hi"));
        assert_eq!(n, 2);
        let Message::Published { payload, .. } = rx1.try_recv().unwrap() else {
            panic!("not a published message")
        };
        assert_eq!(&payload[..], b"hi");
        let Message::Published { pattern, .. } = rx2.try_recv().unwrap() else {
            panic!("not a published message")
        };
        assert_eq!(pattern.as_deref(), Some(&b"n*"[..]));
        assert_eq!(registry.numsub(Space::Plain, b"news"), 1);
        assert_eq!(registry.numpat(), 1);
        drop(s2);
        assert_eq!(registry.numpat(), 0);
        assert!(s1.unsubscribe(Space::Plain, b"news"));
        assert!(registry.channels(Space::Plain, None).is_empty());
        assert_eq!(
            registry.publish(&Bytes::from_static(b"news"), &Bytes::new()),
            0
        );
    }

    /// Shard channels are a namespace of their own: SPUBLISH reaches shard subscribers only,
    /// PUBLISH and patterns never reach them, and a connection's counts keep them apart.
    #[test]
    fn shard_channels_are_apart_from_channels_and_patterns() {
        let registry = Arc::new(PubSub::default());
        let (mb1, mut rx1) = Mailbox::new(1);
        let (mb2, mut rx2) = Mailbox::new(2);
        let mut s1 = Subscriptions::new(registry.clone(), mb1);
        let mut s2 = Subscriptions::new(registry.clone(), mb2);
        let c = Bytes::from_static(b"c");
        assert!(s1.subscribe(Space::Shard, &c));
        assert!(s2.subscribe(Space::Plain, &c));
        assert!(s2.psubscribe(&Bytes::from_static(b"*")));
        assert_eq!((s1.count(), s1.plain_count()), (1, 0));
        assert_eq!((s2.count(), s2.plain_count()), (2, 2));
        assert_eq!(registry.publish_shard(&c, &Bytes::from_static(b"s")), 1);
        let Message::Published { shard, .. } = rx1.try_recv().unwrap() else {
            panic!("not a published message")
        };
        assert!(shard);
        assert!(
            rx2.try_recv().is_err(),
            "a plain subscriber got a shard message"
        );
        assert_eq!(registry.publish(&c, &Bytes::from_static(b"p")), 2);
        assert!(
            rx1.try_recv().is_err(),
            "a shard subscriber got a plain message"
        );
        assert_eq!(registry.numsub(Space::Shard, b"c"), 1);
        assert_eq!(
            registry.channels(Space::Shard, Some(b"c*")),
            vec![c.clone()]
        );
        s1.clear();
        assert_eq!(registry.numsub(Space::Shard, b"c"), 0);
        assert_eq!(registry.publish_shard(&c, &Bytes::new()), 0);
    }

    #[test]
    fn a_subscriber_that_does_not_read_is_cut_off_at_the_bound() {
        let registry = Arc::new(PubSub::default());
        let (mb, _rx) = Mailbox::new(1);
        let overflowed = mb.overflowed.clone();
        let mut s = Subscriptions::new(registry.clone(), mb);
        s.subscribe(Space::Plain, &Bytes::from_static(b"c"));
        let big = Bytes::from(vec![0u8; 1 << 20]);
        let mut delivered = 0;
        for _ in 0..40 {
            delivered += registry.publish(&Bytes::from_static(b"c"), &big);
        }
        assert!((31..40).contains(&delivered), "{delivered}");
        assert!(overflowed.load(Ordering::Acquire));
    }

    /// Names added and removed in any order: membership and count stay right when the last
    /// name moves into a removed one's place.
    #[test]
    fn names_index_follows_swap_removal() {
        let mut n = Names::default();
        let name = |i: u32| Bytes::from(format!("c{i}"));
        for i in 0..10_000 {
            assert!(n.insert(&name(i)));
        }
        assert!(!n.insert(&name(7)));
        for i in (0..10_000).step_by(3) {
            assert!(n.remove(&name(i)));
        }
        assert!(!n.remove(&name(0)));
        for i in 0..10_000 {
            assert_eq!(n.at.contains_key(&name(i)), i % 3 != 0, "c{i}");
        }
        assert_eq!(n.len(), 10_000 - 3334);
        let mut listed = n.to_vec();
        listed.sort();
        listed.dedup();
        assert_eq!(listed.len(), n.len());
        for (i, b) in n.list.iter().enumerate() {
            assert_eq!(n.at.get(b), Some(&i));
        }
    }

    /// Empty messages count too: each costs its queue entry and the reply it becomes, so a
    /// subscriber that does not read is cut off after a bounded number of them (they counted
    /// nothing, and the queue grew without bound).
    #[test]
    fn empty_messages_count_toward_the_bound() {
        let registry = Arc::new(PubSub::default());
        let (mb, _rx) = Mailbox::new(1);
        let overflowed = mb.overflowed.clone();
        let mut s = Subscriptions::new(registry.clone(), mb);
        s.subscribe(Space::Plain, &Bytes::new());
        let mut delivered = 0;
        for _ in 0..(QUEUE_BYTES_MAX / 16) {
            delivered += registry.publish(&Bytes::new(), &Bytes::new());
            if overflowed.load(Ordering::Acquire) {
                break;
            }
        }
        assert!(overflowed.load(Ordering::Acquire), "{delivered} queued");
        assert!(delivered <= QUEUE_BYTES_MAX / MESSAGE_OVERHEAD_BYTES);
    }
}
