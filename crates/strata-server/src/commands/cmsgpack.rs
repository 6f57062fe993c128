//! The `cmsgpack` Lua library of Redis's scripts (lua-cmsgpack as Redis 7 bundles it):
//! `cmsgpack.pack(v, ...)` encodes each value as MessagePack and concatenates them;
//! `cmsgpack.unpack(s)` decodes every value in `s`; `cmsgpack.unpack_one(s [, offset])` and
//! `cmsgpack.unpack_limit(s, limit [, offset])` decode one or `limit` values from `offset` and
//! return the next offset first (-1 once `s` is used up).
//!
//! Its choices, which scripts (and the bytes they store) depend on, are kept exactly: an
//! integral number is an integer in the fewest bytes (positive fixint, uint8-64, negative
//! fixint, int8-64), other numbers a float32 when that loses nothing, else a float64; strings
//! are `str` (str8 from 32 bytes); a table whose keys are exactly 1..n is an array (an empty
//! table too), any other a map in Lua's iteration order; tables nested deeper than
//! [`NESTING_MAX`] (a circular reference) and values MessagePack has no type for (functions)
//! are nil. Decoded integers are Lua numbers (doubles), `bin` is a string.

use mlua::{Lua, MultiValue, Table, Value};

use super::scripting::raise;

/// Deepest table nesting encoded (lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`).
const NESTING_MAX: usize = 16;
/// Deepest array or map nesting decoded: the decoder recurses per level, and a script's string
/// of array headers must fail, not overflow the thread's stack (which would abort the server).
const DECODE_NESTING_MAX: usize = 1000;

/// The `cmsgpack` table.
pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(raise(
                    lua,
                    "bad argument #0 to 'pack' (MessagePack pack needs input.)",
                ));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            placed(lua, unpack(lua, &s.as_bytes(), None, 0))
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::LuaString, Option<i64>)| {
            placed(
                lua,
                unpack(lua, &s.as_bytes(), Some(1), offset.unwrap_or(0)),
            )
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(
            |lua, (s, limit, offset): (mlua::LuaString, i64, Option<i64>)| {
                placed(
                    lua,
                    unpack(lua, &s.as_bytes(), Some(limit), offset.unwrap_or(0)),
                )
            },
        )?,
    )?;
    Ok(t)
}

/// An error of the library placed at the script's line, as `luaL_error` places it.
fn placed<T>(lua: &Lua, result: mlua::Result<T>) -> mlua::Result<T> {
    result.map_err(|e| match e {
        mlua::Error::RuntimeError(message) => raise(lua, message),
        other => other,
    })
}

/// Decodes up to `limit` values of `input` from `offset` (all for `None` with offset 0, as
/// lua-cmsgpack's "decode all" case); with a limit the next offset comes first.
fn unpack(lua: &Lua, input: &[u8], limit: Option<i64>, offset: i64) -> mlua::Result<MultiValue> {
    let decode_all = limit.unwrap_or(0) == 0 && offset == 0;
    let limit = limit.unwrap_or(0);
    if offset < 0 || limit < 0 {
        return Err(mlua::Error::runtime(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            input.len()
        )));
    }
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    if start > input.len() {
        return Err(mlua::Error::runtime(format!(
            "Start offset {offset} greater than input length {}.",
            input.len()
        )));
    }
    let mut cursor = Cursor {
        bytes: input,
        at: start,
        depth: 0,
    };
    let mut values = Vec::new();
    while cursor.at < input.len() && (decode_all || (values.len() as i64) < limit) {
        values.push(decode(lua, &mut cursor)?);
    }
    if !decode_all {
        let next = if cursor.at == input.len() {
            -1
        } else {
            i64::try_from(cursor.at).unwrap_or(i64::MAX)
        };
        values.insert(0, Value::Integer(next));
    }
    Ok(values.into_iter().collect())
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Table(t) if level < NESTING_MAX => encode_table(t, level, out)?,
        // Too deep (a circular reference), or a type MessagePack has no form for.
        _ => out.push(0xc0),
    }
    Ok(())
}

/// An integral number (`IS_INT64_EQUIVALENT`) as an integer, any other as a float.
fn encode_number(n: f64, out: &mut Vec<u8>) {
    // Integral and within i64 (2^63 itself is not: C's cast of it gives -2^63, which differs,
    // so lua-cmsgpack writes it as a float).
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if n.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&n) {
        #[allow(clippy::cast_possible_truncation)]
        encode_int(n as i64, out);
        return;
    }
    #[allow(clippy::cast_possible_truncation)]
    let f = n as f32;
    if f64::from(f) == n {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        // Each arm's range makes its cast exact.
        match n {
            0..=0x7f => out.push(n as u8),
            0x80..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_bytes(b: &[u8], out: &mut Vec<u8>) {
    let len = b.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if let Ok(l) = u8::try_from(len) {
        out.extend_from_slice(&[0xd9, l]);
    } else if let Ok(l) = u16::try_from(len) {
        out.push(0xda);
        out.extend_from_slice(&l.to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    }
    out.extend_from_slice(b);
}

/// A container header: the fix form under 16 entries, else the 16- or 32-bit one.
fn encode_header(len: usize, fix: u8, wide16: u8, out: &mut Vec<u8>) {
    if len < 16 {
        out.push(fix | len as u8);
    } else if let Ok(l) = u16::try_from(len) {
        out.push(wide16);
        out.extend_from_slice(&l.to_be_bytes());
    } else {
        out.push(wide16 + 1);
        out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    }
}

/// lua-cmsgpack's `table_is_an_array`: every key a positive integer (within `int`) and the
/// largest equal to their count.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0f64, 0f64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n.fract() != 0.0 || n > f64::from(i32::MAX) {
            return Ok(false);
        }
        max = f64::max(max, n);
        count += 1.0;
    }
    Ok(max == count)
}

fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    if is_array(t)? {
        let len = t.raw_len();
        encode_header(len, 0x90, 0xdc, out);
        for i in 1..=len {
            encode(&t.raw_get::<Value>(i)?, level + 1, out)?;
        }
    } else {
        // Counted, then encoded in a second walk of the same order: holding every pair at
        // once would take a stack slot each (Lua 5.1's C stack holds 8 000).
        let len = t.clone().pairs::<Value, Value>().count();
        encode_header(len, 0x80, 0xde, out);
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(&k, level + 1, out)?;
            encode(&v, level + 1, out)?;
        }
    }
    Ok(())
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Arrays and maps open around the value being decoded.
    depth: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| mlua::Error::runtime("Missing bytes in input."))?;
        let b = &self.bytes[self.at..end];
        self.at = end;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> mlua::Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn len(&mut self, bytes: usize) -> mlua::Result<usize> {
        Ok(match bytes {
            1 => usize::from(self.array::<1>()?[0]),
            2 => usize::from(u16::from_be_bytes(self.array()?)),
            _ => usize::try_from(u32::from_be_bytes(self.array()?)).unwrap_or(usize::MAX),
        })
    }
}

fn decode(lua: &Lua, c: &mut Cursor<'_>) -> mlua::Result<Value> {
    let tag = c.array::<1>()?[0];
    let number = |n: f64| Ok(Value::Number(n));
    match tag {
        0x00..=0x7f => number(f64::from(tag)),
        0xe0..=0xff => number(f64::from(tag as i8)),
        0x80..=0x8f => decode_map(lua, c, usize::from(tag & 0x0f)),
        0x90..=0x9f => decode_array(lua, c, usize::from(tag & 0x0f)),
        0xa0..=0xbf => decode_string(lua, c, usize::from(tag & 0x1f)),
        0xc0 => Ok(Value::Nil),
        0xc2 => Ok(Value::Boolean(false)),
        0xc3 => Ok(Value::Boolean(true)),
        0xca => number(f64::from(f32::from_be_bytes(c.array()?))),
        0xcb => number(f64::from_be_bytes(c.array()?)),
        0xcc => number(f64::from(c.array::<1>()?[0])),
        0xcd => number(f64::from(u16::from_be_bytes(c.array()?))),
        0xce => number(f64::from(u32::from_be_bytes(c.array()?))),
        // As lua-cmsgpack: 64-bit integers become the nearest double.
        0xcf => number(u64::from_be_bytes(c.array()?) as f64),
        0xd0 => number(f64::from(i8::from_be_bytes(c.array()?))),
        0xd1 => number(f64::from(i16::from_be_bytes(c.array()?))),
        0xd2 => number(f64::from(i32::from_be_bytes(c.array()?))),
        0xd3 => number(i64::from_be_bytes(c.array()?) as f64),
        // Strings, binaries, arrays and maps with a 1-, 2- or 4-byte length.
        _ => {
            type Body = fn(&Lua, &mut Cursor<'_>, usize) -> mlua::Result<Value>;
            let (length_bytes, body): (usize, Body) = match tag {
                0xc4 | 0xd9 => (1, decode_string),
                0xc5 | 0xda => (2, decode_string),
                0xc6 | 0xdb => (4, decode_string),
                0xdc => (2, decode_array),
                0xdd => (4, decode_array),
                0xde => (2, decode_map),
                0xdf => (4, decode_map),
                _ => return Err(mlua::Error::runtime("Bad data format in input.")),
            };
            let n = c.len(length_bytes)?;
            body(lua, c, n)
        }
    }
}

/// Decodes the elements of an array or map (`body`) one level deeper.
fn nested(
    c: &mut Cursor<'_>,
    body: impl FnOnce(&mut Cursor<'_>) -> mlua::Result<Value>,
) -> mlua::Result<Value> {
    if c.depth >= DECODE_NESTING_MAX {
        return Err(mlua::Error::runtime(format!(
            "Bad data format in input: nested deeper than {DECODE_NESTING_MAX} levels."
        )));
    }
    c.depth += 1;
    let value = body(c);
    c.depth -= 1;
    value
}

fn decode_string(lua: &Lua, c: &mut Cursor<'_>, n: usize) -> mlua::Result<Value> {
    let b = c.take(n)?;
    Ok(Value::String(lua.create_string(b)?))
}

fn decode_array(lua: &Lua, c: &mut Cursor<'_>, n: usize) -> mlua::Result<Value> {
    nested(c, |c| {
        // The count comes from the input: the table grows as elements arrive, not up front.
        let t = lua.create_table()?;
        for i in 1..=n {
            t.raw_set(i, decode(lua, c)?)?;
        }
        Ok(Value::Table(t))
    })
}

fn decode_map(lua: &Lua, c: &mut Cursor<'_>, n: usize) -> mlua::Result<Value> {
    nested(c, |c| {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = decode(lua, c)?;
            let v = decode(lua, c)?;
            // A nil key cannot be set (lua_settable would fail too): the input is bad.
            if k.is_nil() {
                return Err(mlua::Error::runtime("Bad data format in input."));
            }
            t.raw_set(k, v)?;
        }
        Ok(Value::Table(t))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn packed(script: &str) -> Vec<u8> {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", table(&lua).unwrap()).unwrap();
        let s: mlua::LuaString = lua.load(script).eval().unwrap();
        s.as_bytes().to_vec()
    }

    /// Known vectors: redis-server's scripting.tcl (0.1, -2^40) and the MessagePack spec's
    /// forms at each boundary.
    #[test]
    fn encodes_as_lua_cmsgpack_does() {
        let hex = |b: Vec<u8>| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            hex(packed("return cmsgpack.pack(0.1)")),
            "cb3fb999999999999a"
        );
        assert_eq!(
            hex(packed("return cmsgpack.pack(-1099511627776)")),
            "d3ffffff0000000000"
        );
        assert_eq!(hex(packed("return cmsgpack.pack(0.5)")), "ca3f000000");
        assert_eq!(
            hex(packed(
                "return cmsgpack.pack(127, 128, 65536, -32, -33, -129)"
            )),
            "7fcc80ce00010000e0d0dfd1ff7f"
        );
        assert_eq!(
            hex(packed("return cmsgpack.pack({}, {1, 2}, true, false, nil)")),
            "90920102c3c2c0"
        );
        assert_eq!(
            hex(packed("return cmsgpack.pack(string.rep('x', 32))"))[..4].to_string(),
            "d920"
        );
    }

    /// Input nested deeper than the decoder follows (a crafted string of array headers) is
    /// refused with an error, not followed until the thread's stack overflows.
    #[test]
    fn deeply_nested_input_is_refused() {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", table(&lua).unwrap()).unwrap();
        let err = lua
            .load("return cmsgpack.unpack(string.rep('\\145', 1000000) .. '\\192')")
            .exec()
            .unwrap_err();
        assert!(err.to_string().contains("nested"), "{err}");
        // Within the limit it decodes.
        let ok: bool = lua
            .load(
                "local t = cmsgpack.unpack(string.rep('\\145', 100) .. '\\1') \
                   for _ = 1, 100 do t = t[1] end return t == 1",
            )
            .eval()
            .unwrap();
        assert!(ok);
    }

    /// redis-server's smoke test packs a map and an array of 100 000 entries each.
    #[test]
    fn big_tables_round_trip() {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", table(&lua).unwrap()).unwrap();
        let ok: bool = lua
            .load(
                "local m, a = {}, {}
                 for i = 1, 100000 do m[tostring(i)] = i a[i] = i end
                 local r = cmsgpack.unpack(cmsgpack.pack({m = m, a = a}))
                 return r.m['99999'] == 99999 and #r.a == 100000 and r.a[100000] == 100000",
            )
            .eval()
            .unwrap();
        assert!(ok);
    }

    #[test]
    fn round_trips_and_reports_bad_input() {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", table(&lua).unwrap()).unwrap();
        let ok: bool = lua
            .load(
                "local t = {a = 1, b = {1, 2, 'x'}, c = 2^40, d = -0.25}
                 local r = cmsgpack.unpack(cmsgpack.pack(t))
                 local off, one = cmsgpack.unpack_one(cmsgpack.pack('a', 'b'), 0)
                 return r.a == 1 and r.b[3] == 'x' and r.c == 2^40 and r.d == -0.25
                    and off == 2 and one == 'a'",
            )
            .eval()
            .unwrap();
        assert!(ok);
        let err = lua
            .load("return cmsgpack.unpack('\\220\\0')")
            .exec()
            .unwrap_err();
        assert!(err.to_string().contains("Missing bytes in input."), "{err}");
        let err = lua
            .load("return cmsgpack.unpack('\\193')")
            .exec()
            .unwrap_err();
        assert!(
            err.to_string().contains("Bad data format in input."),
            "{err}"
        );
    }
}
