//! Geo commands on sorted sets: GEOADD GEOPOS GEODIST GEOHASH GEOSEARCH GEOSEARCHSTORE
//! GEORADIUS GEORADIUSBYMEMBER and their `_RO` forms, with redis-server 7's replies and errors.
//!
//! A position is a sorted set member whose score is its 52-bit geohash, as in Redis: longitude
//! and latitude each scaled to 26 bits over [-180, 180] and [-85.05112878, 85.05112878] (the
//! Web Mercator limits), interleaved latitude-first. So GEOADD is a ZADD, ZRANGE and ZREM work
//! on positions, and a search reads the score ranges of the geohash cell around the centre and
//! its eight neighbours (cells whose prefix is the cell's), then keeps the members within the
//! radius or box. Every float step follows Redis's order of operations, so positions,
//! distances and the members found are the same bit for bit.

use std::f64::consts::PI;

use bytes::Bytes;

use super::collections::read_live;
use super::zsets::{score_arg, scores, store_entries, zadd};
use super::{is, Ctx, Spec, READ, WRITE};
use crate::collection::visit_zset_scores;
use crate::error::{Error, Result};
use crate::keyspace::KeyType;
use crate::ldouble::LongDouble;
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "geoadd", arity: -5, flags: WRITE, keys: (1, 1, 1), group: "geo", summary: "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", handler: geoadd },
    Spec { name: "geopos", arity: -2, flags: READ, keys: (1, 1, 1), group: "geo", summary: "Returns the longitude and latitude of members from a geospatial index.", handler: geopos },
    Spec { name: "geodist", arity: -4, flags: READ, keys: (1, 1, 1), group: "geo", summary: "Returns the distance between two members of a geospatial index.", handler: geodist },
    Spec { name: "geohash", arity: -2, flags: READ, keys: (1, 1, 1), group: "geo", summary: "Returns members from a geospatial index as geohash strings.", handler: geohash },
    Spec { name: "geosearch", arity: -7, flags: READ, keys: (1, 1, 1), group: "geo", summary: "Queries a geospatial index for members inside an area of a box or a circle.", handler: geosearch },
    Spec { name: "geosearchstore", arity: -8, flags: WRITE, keys: (1, 2, 1), group: "geo", summary: "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", handler: geosearchstore },
    Spec { name: "georadius", arity: -6, flags: WRITE, keys: (1, 1, 1), group: "geo", summary: "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", handler: georadius },
    Spec { name: "georadius_ro", arity: -6, flags: READ, keys: (1, 1, 1), group: "geo", summary: "Returns members from a geospatial index that are within a distance from a coordinate.", handler: georadius_ro },
    Spec { name: "georadiusbymember", arity: -5, flags: WRITE, keys: (1, 1, 1), group: "geo", summary: "Queries a geospatial index for members within a distance from a member, optionally stores the result.", handler: georadiusbymember },
    Spec { name: "georadiusbymember_ro", arity: -5, flags: READ, keys: (1, 1, 1), group: "geo", summary: "Returns members from a geospatial index that are within a distance from a member.", handler: georadiusbymember_ro },
];

/// Longitude limits (degrees).
const LONG_MIN: f64 = -180.0;
const LONG_MAX: f64 = 180.0;
/// Latitude limits (degrees): Web Mercator's, where the projection stays finite.
const LAT_MIN: f64 = -85.051_128_78;
const LAT_MAX: f64 = 85.051_128_78;
/// Bits per coordinate in a stored geohash (52 bits in all: exact in a double).
const STEP_MAX: u8 = 26;
/// The earth's quadratic mean radius for WGS-84, as Redis uses it (metres).
const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// Half the Web Mercator world width (metres): the search step estimate doubles up to it.
const MERCATOR_MAX_M: f64 = 20_037_726.37;
/// The characters of a standard geohash string.
const GEOHASH_ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

/// A coordinate range (degrees).
#[derive(Debug, Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

/// The ranges positions are stored over.
const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A geohash of `step` bits per coordinate; `step` 0 (with `bits` 0) is "no cell".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hash {
    bits: u64,
    step: u8,
}

impl Hash {
    const NONE: Hash = Hash { bits: 0, step: 0 };

    fn is_none(self) -> bool {
        self == Hash::NONE
    }

    /// The hash as a 52-bit score prefix (the cell's lowest score).
    fn align52(self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// A cell: its longitude and latitude extent.
#[derive(Debug, Clone, Copy)]
struct Area {
    long: Range,
    lat: Range,
}

/// Spreads the low 32 bits of `v` to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `v` into the low 32 bits.
fn gather(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// The `step`-bit geohash of a position within the ranges (`None` outside them).
fn encode(long_range: Range, lat_range: Range, long: f64, lat: f64, step: u8) -> Option<Hash> {
    if !(LONG_MIN..=LONG_MAX).contains(&long) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || long < long_range.min || long > long_range.max
    {
        return None;
    }
    let cells = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * cells;
    let long_offset = (long - long_range.min) / (long_range.max - long_range.min) * cells;
    // Truncation toward zero, as C's double-to-unsigned conversion.
    Some(Hash {
        bits: spread(lat_offset as u32) | (spread(long_offset as u32) << 1),
        step,
    })
}

/// The cell of `hash` over the given ranges.
fn decode(long_range: Range, lat_range: Range, hash: Hash) -> Area {
    let lat_cell = gather(hash.bits);
    let long_cell = gather(hash.bits >> 1);
    let cells = (1u64 << hash.step) as f64;
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    // The edge of cell number `cell` (a whole number, exact in a double) along one coordinate.
    let edge = |cell: f64, min: f64, scale: f64| min + (cell * 1.0 / cells) * scale;
    let (lat, long) = (f64::from(lat_cell), f64::from(long_cell));
    Area {
        lat: Range {
            min: edge(lat, lat_range.min, lat_scale),
            max: edge(lat + 1.0, lat_range.min, lat_scale),
        },
        long: Range {
            min: edge(long, long_range.min, long_scale),
            max: edge(long + 1.0, long_range.min, long_scale),
        },
    }
}

/// The position a stored score stands for: the centre of its 26-bit cell, within the limits.
fn position(score: f64) -> (f64, f64) {
    // C's conversion of the score to an unsigned integer (scores of positions are whole): on
    // the machines Redis runs on, a negative score converts through a signed integer and
    // wraps around (-1 is all ones), where Rust's `as u64` would give 0.
    let bits = if score < 0.0 {
        score as i64 as u64
    } else {
        score as u64
    };
    let area = decode(
        LONG_RANGE,
        LAT_RANGE,
        Hash {
            bits,
            step: STEP_MAX,
        },
    );
    let long = ((area.long.min + area.long.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (long, lat)
}

/// Longitude bits of a hash (odd positions) and latitude bits (even positions).
const LONG_BITS: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const LAT_BITS: u64 = 0x5555_5555_5555_5555;

/// Moves a hash one cell along the coordinate whose bits are `axis` (`LONG_BITS`: east for
/// `d` > 0, west for `d` < 0; `LAT_BITS`: north, south): adds or subtracts one in those bits
/// alone, the other coordinate's bits filled so the carry passes through them.
fn move_along(hash: &mut Hash, d: i8, axis: u64) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let mut moving = hash.bits & axis;
    let kept = hash.bits & !axis;
    let zz = !axis >> shift;
    if d > 0 {
        moving = moving.wrapping_add(zz + 1);
    } else {
        moving |= zz;
        moving = moving.wrapping_sub(zz + 1);
    }
    moving &= axis >> shift;
    hash.bits = moving | kept;
}

fn moved(hash: Hash, dx: i8, dy: i8) -> Hash {
    let mut h = hash;
    move_along(&mut h, dx, LONG_BITS);
    move_along(&mut h, dy, LAT_BITS);
    h
}

fn deg_rad(deg: f64) -> f64 {
    deg * (PI / 180.0)
}

fn rad_deg(rad: f64) -> f64 {
    rad / (PI / 180.0)
}

/// Great-circle distance along a meridian (metres).
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine great-circle distance (metres), as Redis computes it.
fn distance(long1: f64, lat1: f64, long2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(long2) - deg_rad(long1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// The area a search covers, around `centre` (longitude, latitude).
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Within `radius` (in the unit).
    Circle { radius: f64 },
    /// Within an axis-aligned box `width` x `height` (in the unit).
    Box { width: f64, height: f64 },
}

#[derive(Debug, Clone, Copy)]
struct Search {
    centre: (f64, f64),
    shape: Shape,
    /// Metres per unit.
    to_metres: f64,
}

impl Search {
    /// The distance from the centre of a member at `score` with its position, if it lies
    /// inside.
    fn within(&self, score: f64) -> Option<(f64, (f64, f64))> {
        let (long, lat) = position(score);
        let (cx, cy) = self.centre;
        let d = match self.shape {
            Shape::Circle { radius } => {
                let d = distance(cx, cy, long, lat);
                (d <= radius * self.to_metres).then_some(d)?
            }
            Shape::Box { width, height } => {
                let (w, h) = (width * self.to_metres, height * self.to_metres);
                if lat_distance(lat, cy) > h / 2.0 || distance(long, lat, cx, lat) > w / 2.0 {
                    return None;
                }
                distance(cx, cy, long, lat)
            }
        };
        Some((d, (long, lat)))
    }

    /// [min longitude, min latitude, max longitude, max latitude] of the shape.
    fn bounds(&self) -> [f64; 4] {
        let (long, lat) = self.centre;
        let (half_h, half_w) = match self.shape {
            Shape::Circle { radius } => (radius, radius),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (height, width) = (half_h * self.to_metres, half_w * self.to_metres);
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let long_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat + lat_delta).cos());
        let long_delta_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat - lat_delta).cos());
        // The box is widest towards the equator.
        let long_delta = if lat < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            long - long_delta,
            lat - lat_delta,
            long + long_delta,
            lat + lat_delta,
        ]
    }

    /// The cells to read: the centre's cell at a step that covers the shape, then its eight
    /// neighbours (north, south, east, west, north-east, north-west, south-east, south-west),
    /// those the shape cannot reach left out (`Hash::NONE`).
    fn cells(&self) -> [Hash; 9] {
        let [min_long, min_lat, max_long, max_lat] = self.bounds();
        let (long, lat) = self.centre;
        let radius_m = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.to_metres;
        let mut step = estimate_step(radius_m, lat);
        let around = |step: u8| -> Option<(Hash, Area)> {
            let hash = encode(LONG_RANGE, LAT_RANGE, long, lat, step)?;
            Some((hash, decode(LONG_RANGE, LAT_RANGE, hash)))
        };
        let Some((mut hash, mut area)) = around(step) else {
            return [Hash::NONE; 9];
        };
        // A neighbour too close to the shape's edge: one step coarser.
        let decrease = decode(LONG_RANGE, LAT_RANGE, moved(hash, 0, 1)).lat.max < max_lat
            || decode(LONG_RANGE, LAT_RANGE, moved(hash, 0, -1)).lat.min > min_lat
            || decode(LONG_RANGE, LAT_RANGE, moved(hash, 1, 0)).long.max < max_long
            || decode(LONG_RANGE, LAT_RANGE, moved(hash, -1, 0)).long.min > min_long;
        if step > 1 && decrease {
            step -= 1;
            if let Some(coarser) = around(step) {
                (hash, area) = coarser;
            }
        }
        let mut cells = [
            hash,
            moved(hash, 0, 1),
            moved(hash, 0, -1),
            moved(hash, 1, 0),
            moved(hash, -1, 0),
            moved(hash, 1, 1),
            moved(hash, -1, 1),
            moved(hash, 1, -1),
            moved(hash, -1, -1),
        ];
        if step >= 2 {
            let (n, s, e, w, ne, nw, se, sw) = (1, 2, 3, 4, 5, 6, 7, 8);
            let mut drop = |ids: [usize; 3]| ids.iter().for_each(|&i| cells[i] = Hash::NONE);
            if area.lat.min < min_lat {
                drop([s, sw, se]);
            }
            if area.lat.max > max_lat {
                drop([n, ne, nw]);
            }
            if area.long.min < min_long {
                drop([w, sw, nw]);
            }
            if area.long.max > max_long {
                drop([e, se, ne]);
            }
        }
        cells
    }
}

/// Bits per coordinate of the cells a search of `range_m` metres around latitude `lat` reads.
fn estimate_step(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut range = range_m;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX_M {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// A member found by a search.
struct Found {
    member: Bytes,
    score: f64,
    /// Metres from the centre.
    dist: f64,
    position: (f64, f64),
}

/// Reads the cells of `search` in the sorted set `key` (metadata `meta`), in Redis's order:
/// each cell's score range in score order, a cell equal to the previous one read skipped, and
/// with `limit` (ANY) stopping once that many are found.
fn find(
    ctx: &Ctx<'_>,
    key: &[u8],
    meta: &crate::collection::Meta,
    search: &Search,
    limit: Option<usize>,
) -> Result<Vec<Found>> {
    let cells = search.cells();
    let mut found: Vec<Found> = Vec::new();
    let mut last: Option<usize> = None;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_none() {
            continue;
        }
        // (Redis compares with the last cell read unless that was the centre's.)
        if last.is_some_and(|l| l > 0 && cells[l] == *cell) {
            continue;
        }
        if limit.is_some_and(|n| !found.is_empty() && found.len() >= n) {
            break;
        }
        let min = cell.align52() as f64;
        let max = Hash {
            bits: cell.bits + 1,
            step: cell.step,
        }
        .align52() as f64;
        visit_zset_scores(ctx.db(), ctx.dbi(), key, meta, min, max, &mut |m, score| {
            if let Some((dist, position)) = search.within(score) {
                found.push(Found {
                    member: Bytes::copy_from_slice(m),
                    score,
                    dist,
                    position,
                });
            }
            !limit.is_some_and(|n| !found.is_empty() && found.len() >= n)
        })?;
        last = Some(i);
    }
    Ok(found)
}

/// A longitude and latitude argument pair, with Redis's errors.
fn long_lat(args: &[Bytes]) -> Result<(f64, f64)> {
    let long = score_arg(&args[0])?;
    let lat = score_arg(&args[1])?;
    if !(LONG_MIN..=LONG_MAX).contains(&long) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(Error::command(format!(
            "invalid longitude,latitude pair {},{}",
            c_fixed6(long),
            c_fixed6(lat)
        )));
    }
    Ok((long, lat))
}

/// C's `%f`.
fn c_fixed6(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{v:.6}")
    }
}

/// Metres per unit of a unit argument.
fn unit(arg: &[u8]) -> Result<f64> {
    if is(arg, "m") {
        Ok(1.0)
    } else if is(arg, "km") {
        Ok(1000.0)
    } else if is(arg, "ft") {
        Ok(0.3048)
    } else if is(arg, "mi") {
        Ok(1609.34)
    } else {
        Err(Error::command(
            "unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

/// A float argument with Redis's message for it.
fn float_arg(arg: &[u8], message: &'static str) -> Result<f64> {
    score_arg(arg).map_err(|_| Error::command(message))
}

/// A distance and its unit: (distance in the unit, metres per unit).
fn radius_args(args: &[Bytes]) -> Result<(f64, f64)> {
    let r = float_arg(&args[0], "need numeric radius")?;
    if r < 0.0 {
        return Err(Error::command("radius cannot be negative"));
    }
    Ok((r, unit(&args[1])?))
}

/// A box width, height and unit.
fn box_args(args: &[Bytes]) -> Result<(f64, f64, f64)> {
    let w = float_arg(&args[0], "need numeric width")?;
    let h = float_arg(&args[1], "need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(Error::command("height or width cannot be negative"));
    }
    Ok((w, h, unit(&args[2])?))
}

/// A distance in GEO replies: `%.4f`.
fn distance_reply(d: f64) -> Reply {
    Reply::text(format!("{d:.4}"))
}

/// A coordinate in GEO replies: Redis's human long double.
fn coordinate_reply(v: f64) -> Reply {
    Reply::DoubleText(
        LongDouble::from_f64(v)
            .map(|l| l.to_redis_string())
            .unwrap_or_else(|| v.to_string()),
    )
}

/// GEOADD key [NX|XX] [CH] long lat member ...: a ZADD of the members' geohashes.
fn geoadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut first = 2;
    let (mut nx, mut xx) = (false, false);
    while let Some(a) = args.get(first) {
        if is(a, "NX") {
            nx = true;
        } else if is(a, "XX") {
            xx = true;
        } else if !is(a, "CH") {
            break;
        }
        first += 1;
    }
    if (args.len() - first) % 3 != 0 || (nx && xx) {
        return Err(Error::Syntax);
    }
    let mut zadd_args: Vec<Bytes> = vec![Bytes::from_static(b"zadd")];
    zadd_args.extend(args[1..first].iter().cloned());
    for triple in args[first..].chunks_exact(3) {
        let (long, lat) = long_lat(&triple[..2])?;
        let hash = encode(LONG_RANGE, LAT_RANGE, long, lat, STEP_MAX)
            .ok_or_else(|| Error::command("invalid longitude,latitude pair"))?;
        zadd_args.push(Bytes::from(hash.align52().to_string()));
        zadd_args.push(triple[2].clone());
    }
    zadd(ctx, &zadd_args)
}

/// GEOPOS key member ...: each member's longitude and latitude, or a null array.
fn geopos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let found = scores(ctx, &args[1], &args[2..])?;
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|s| match s {
                Some(score) => {
                    let (long, lat) = position(score);
                    Reply::Array(vec![coordinate_reply(long), coordinate_reply(lat)])
                }
                None => Reply::NilArray,
            })
            .collect(),
    ))
}

/// GEODIST key a b [unit]: the distance between two members, null when either is missing.
fn geodist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let to_metres = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(Error::Syntax),
    };
    if read_live(ctx, &args[1], KeyType::Zset)?.is_none() {
        return Ok(Reply::Nil);
    }
    let found = scores(ctx, &args[1], &args[2..4])?;
    let (Some(a), Some(b)) = (found[0], found[1]) else {
        return Ok(Reply::Nil);
    };
    let ((x1, y1), (x2, y2)) = (position(a), position(b));
    Ok(distance_reply(distance(x1, y1, x2, y2) / to_metres))
}

/// GEOHASH key member ...: each member's 11-character standard geohash (latitude over
/// [-90, 90]), or null.
fn geohash(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let found = scores(ctx, &args[1], &args[2..])?;
    let standard_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|s| {
                let Some(score) = s else {
                    return Reply::Nil;
                };
                let (long, lat) = position(score);
                let bits =
                    encode(LONG_RANGE, standard_lat, long, lat, STEP_MAX).map_or(0, |h| h.bits);
                let text: Vec<u8> = (0..11)
                    .map(|i| {
                        // 52 bits make ten characters; the eleventh is '0', as in Redis.
                        let idx = if i == 10 {
                            0
                        } else {
                            (bits >> (52 - (i + 1) * 5)) & 0x1f
                        };
                        GEOHASH_ALPHABET[idx as usize]
                    })
                    .collect();
                Reply::Bulk(Bytes::from(text))
            })
            .collect(),
    ))
}

/// Which search command runs (Redis's `georadiusGeneric` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS[_RO] key long lat radius unit ...
    Coords { store: bool },
    /// GEORADIUSBYMEMBER[_RO] key member radius unit ...
    Member { store: bool },
    /// GEOSEARCH key ...
    Search,
    /// GEOSEARCHSTORE dest key ...
    SearchStore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

fn georadius(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    search_generic(ctx, args, Variant::Coords { store: true })
}

fn georadius_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    search_generic(ctx, args, Variant::Coords { store: false })
}

fn georadiusbymember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    search_generic(ctx, args, Variant::Member { store: true })
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    search_generic(ctx, args, Variant::Member { store: false })
}

fn geosearch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    search_generic(ctx, args, Variant::Search)
}

fn geosearchstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    search_generic(ctx, args, Variant::SearchStore)
}

/// The position of `member` in the sorted set `key`, or Redis's error.
fn member_position(ctx: &Ctx<'_>, key: &[u8], member: &Bytes) -> Result<(f64, f64)> {
    match scores(ctx, key, std::slice::from_ref(member))?[0] {
        Some(score) => Ok(position(score)),
        None => Err(Error::command("could not decode requested zset member")),
    }
}

/// Every search command, parsed and answered in Redis's order: the source's type first, then
/// the centre and shape, the options, their conflicts, and only then whether the source exists.
fn search_generic(ctx: &mut Ctx<'_>, args: &[Bytes], variant: Variant) -> Result<Reply> {
    let src_at = if variant == Variant::SearchStore {
        2
    } else {
        1
    };
    let src = &args[src_at];
    let live = read_live(ctx, src, KeyType::Zset)?;
    let mut centre: Option<(f64, f64)> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let base = match variant {
        Variant::Coords { .. } => {
            centre = Some(long_lat(&args[2..4])?);
            let (radius, to_metres) = radius_args(&args[4..6])?;
            shape = Some((Shape::Circle { radius }, to_metres));
            6
        }
        Variant::Member { .. } => {
            if live.is_some() {
                centre = Some(member_position(ctx, src, &args[2])?);
                let (radius, to_metres) = radius_args(&args[3..5])?;
                shape = Some((Shape::Circle { radius }, to_metres));
            }
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => 3,
    };
    let geosearch = matches!(variant, Variant::Search | Variant::SearchStore);
    let store_event = if geosearch {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    let may_store = matches!(
        variant,
        Variant::Coords { store: true } | Variant::Member { store: true }
    );
    let (mut with_dist, mut with_hash, mut with_coord, mut any) = (false, false, false, false);
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: Option<usize> = None;
    let mut store: Option<Bytes> = (variant == Variant::SearchStore).then(|| args[1].clone());
    let mut store_dist = false;
    let rest = &args[base.min(args.len())..];
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        let left = rest.len() - i - 1;
        if is(arg, "WITHDIST") {
            with_dist = true;
        } else if is(arg, "WITHHASH") {
            with_hash = true;
        } else if is(arg, "WITHCOORD") {
            with_coord = true;
        } else if is(arg, "ANY") {
            any = true;
        } else if is(arg, "ASC") {
            sort = Sort::Asc;
        } else if is(arg, "DESC") {
            sort = Sort::Desc;
        } else if is(arg, "COUNT") && left >= 1 {
            let n = crate::num::parse_i64(&rest[i + 1]).ok_or(Error::NotInteger)?;
            if n <= 0 {
                return Err(Error::command("COUNT must be > 0"));
            }
            count = Some(usize::try_from(n).unwrap_or(usize::MAX));
            i += 1;
        } else if (is(arg, "STORE") || is(arg, "STOREDIST")) && left >= 1 && may_store {
            store = Some(rest[i + 1].clone());
            store_dist = is(arg, "STOREDIST");
            i += 1;
        } else if is(arg, "STOREDIST") && variant == Variant::SearchStore {
            store_dist = true;
        } else if is(arg, "FROMMEMBER") && left >= 1 && geosearch && !from_lonlat {
            if live.is_some() {
                centre = Some(member_position(ctx, src, &rest[i + 1])?);
            }
            from_member = true;
            i += 1;
        } else if is(arg, "FROMLONLAT") && left >= 2 && geosearch && !from_member {
            centre = Some(long_lat(&rest[i + 1..i + 3])?);
            from_lonlat = true;
            i += 2;
        } else if is(arg, "BYRADIUS") && left >= 2 && geosearch && !by_box {
            let (radius, to_metres) = radius_args(&rest[i + 1..i + 3])?;
            shape = Some((Shape::Circle { radius }, to_metres));
            by_radius = true;
            i += 2;
        } else if is(arg, "BYBOX") && left >= 3 && geosearch && !by_radius {
            let (width, height, to_metres) = box_args(&rest[i + 1..i + 4])?;
            shape = Some((Shape::Box { width, height }, to_metres));
            by_box = true;
            i += 3;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    let name = String::from_utf8_lossy(&args[0]).to_string();
    if store.is_some() && (with_dist || with_hash || with_coord) {
        return Err(Error::command(format!(
            "{} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if variant == Variant::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    if geosearch && !(from_member || from_lonlat) {
        return Err(Error::command(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if geosearch && !(by_radius || by_box) {
        return Err(Error::command(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count.is_none() {
        return Err(Error::command("the ANY argument requires COUNT argument"));
    }
    let (Some(z), Some(centre), Some((shape, to_metres))) = (live, centre, shape) else {
        return match store {
            Some(dst) => store_entries(ctx, &dst, &[], 0, store_event),
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    if count.is_some() && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let search = Search {
        centre,
        shape,
        to_metres,
    };
    let mut found = find(ctx, src, &z.meta, &search, count.filter(|_| any))?;
    match sort {
        Sort::None => {}
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
    }
    found.truncate(count.unwrap_or(usize::MAX));
    if let Some(dst) = store {
        let entries: Vec<(Bytes, f64)> = found
            .into_iter()
            .map(|f| {
                let score = if store_dist {
                    f.dist / to_metres
                } else {
                    f.score
                };
                (f.member, score)
            })
            .collect();
        let listpack = entries.len();
        return store_entries(ctx, &dst, &entries, listpack, store_event);
    }
    let options = usize::from(with_dist) + usize::from(with_hash) + usize::from(with_coord);
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|f| {
                if options == 0 {
                    return Reply::Bulk(f.member);
                }
                let mut item = vec![Reply::Bulk(f.member)];
                if with_dist {
                    item.push(distance_reply(f.dist / to_metres));
                }
                if with_hash {
                    item.push(Reply::Int(f.score as i64));
                }
                if with_coord {
                    item.push(Reply::Array(vec![
                        coordinate_reply(f.position.0),
                        coordinate_reply(f.position.1),
                    ]));
                }
                Reply::Array(item)
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's documented example: Palermo and Catania, their stored scores, positions and
    /// distance (redis.io GEOADD/GEOPOS/GEODIST pages).
    #[test]
    fn palermo_and_catania_as_redis_documents_them() {
        let palermo =
            encode(LONG_RANGE, LAT_RANGE, 13.361389, 38.115556, STEP_MAX).map(Hash::align52);
        assert_eq!(palermo, Some(3_479_099_956_230_698));
        let catania =
            encode(LONG_RANGE, LAT_RANGE, 15.087269, 37.502669, STEP_MAX).map(Hash::align52);
        assert_eq!(catania, Some(3_479_447_370_796_909));
        let (x1, y1) = position(3_479_099_956_230_698.0);
        let (x2, y2) = position(3_479_447_370_796_909.0);
        assert_eq!(format!("{:.4}", distance(x1, y1, x2, y2)), "166274.1516");
        let text = |v: f64| LongDouble::from_f64(v).map(|l| l.to_redis_string());
        assert_eq!(text(x1).as_deref(), Some("13.36138933897018433"));
        assert_eq!(text(y1).as_deref(), Some("38.11555639549629859"));
    }

    #[test]
    fn interleaving_round_trips() {
        for v in [0u32, 1, 0x3ff_ffff, 0x155_5555, 12345] {
            assert_eq!(gather(spread(v)), v);
            assert_eq!(gather(spread(v) << 1 >> 1), v);
        }
    }
}
