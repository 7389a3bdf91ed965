//! A bounded reader of the Python pickles `torch.save` writes (protocols 2 to 5), for state dicts.
//!
//! The file is untrusted, so the machine is built to stay small whatever it is fed:
//! - every value other than a scalar lives in one arena and is referred to by index, so memo
//!   references (`BINGET`) copy an index, never a structure (no memo bombs), and nesting builds no
//!   recursive Rust values (no recursion on drop, whatever the depth);
//! - every length is checked against the bytes that remain before anything is allocated;
//! - no code runs: a call of a global the reader does not know becomes an opaque [`Obj::Call`];
//!   the three calls of a state dict (`OrderedDict`, `_rebuild_tensor_v2`, `_rebuild_parameter`)
//!   are modelled.
//!
//! Memory is linear in the pickle's length (each opcode adds at most one arena entry) and capped:
//! at most [`MAX_ITEMS`] objects, stack entries, marks and memo entries (a state dict needs a few
//! per tensor), so a pickle of a few MB cannot make it hold more than a few hundred MB.

use std::collections::HashMap;

/// A value on the machine's stack: scalars inline, everything else an index into [`Pickle::arena`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    /// Python's `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A float.
    Float(f64),
    /// An object in the arena.
    Obj(usize),
}

/// An object in the arena.
#[derive(Debug)]
pub enum Obj {
    /// A `str` (or a protocol-2 `bytes` string decoded as UTF-8, lossily).
    Str(String),
    /// A `bytes` object; only its length is kept.
    Bytes(usize),
    /// A tuple.
    Tuple(Vec<Val>),
    /// A list.
    List(Vec<Val>),
    /// A dict (an `OrderedDict` included), in insertion order.
    Dict(Vec<(Val, Val)>),
    /// A reference to a global (`module.name`), not imported.
    Global {
        /// The module path.
        module: String,
        /// The name in the module.
        name: String,
    },
    /// A call the reader does not model, kept unevaluated.
    Call {
        /// What is called.
        callable: Val,
    },
    /// A tensor storage, from a persistent id `('storage', type, key, location, numel)`.
    Storage {
        /// The storage class name (`FloatStorage`, `LongStorage`, ...).
        kind: String,
        /// The key naming its file in the archive (`data/<key>`).
        key: String,
        /// Its declared element count.
        numel: u64,
    },
    /// A tensor: a strided view of a storage (`torch._utils._rebuild_tensor_v2`).
    Tensor(TensorView),
}

/// A strided view of a storage, as the pickle declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorView {
    /// Arena index of the [`Obj::Storage`].
    pub storage: usize,
    /// Offset of the first element, in elements.
    pub offset: u64,
    /// The shape.
    pub shape: Vec<u64>,
    /// The strides, in elements.
    pub strides: Vec<u64>,
}

/// A parsed pickle: the arena and the value `STOP` returned.
#[derive(Debug)]
pub struct Pickle {
    /// Every non-scalar value.
    pub arena: Vec<Obj>,
    /// The pickled object.
    pub root: Val,
}

impl Pickle {
    /// The object behind `v`, if it is one.
    pub fn obj(&self, v: Val) -> Option<&Obj> {
        match v {
            Val::Obj(i) => self.arena.get(i),
            _ => None,
        }
    }

    /// The string `v` holds, if it is one.
    pub fn str(&self, v: Val) -> Option<&str> {
        match self.obj(v) {
            Some(Obj::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// The entries of the dict `v`, if it is one.
    pub fn dict(&self, v: Val) -> Option<&[(Val, Val)]> {
        match self.obj(v) {
            Some(Obj::Dict(d)) => Some(d),
            _ => None,
        }
    }
}

/// Why a pickle was refused: the byte offset and what was wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct PickleError {
    /// Offset of the opcode that failed.
    pub at: usize,
    /// What was wrong there.
    pub message: String,
}

impl std::fmt::Display for PickleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pickle byte {}: {}", self.at, self.message)
    }
}

type Res<T> = std::result::Result<T, String>;

/// The most objects, stack entries, marks or memo entries a pickle may create (a state dict of a
/// thousand tensors needs about fifteen thousand).
pub const MAX_ITEMS: usize = 2_000_000;

/// Parse `bytes` as one pickle.
pub fn parse(bytes: &[u8]) -> std::result::Result<Pickle, PickleError> {
    let mut m =
        Machine { bytes, pos: 0, stack: Vec::new(), marks: Vec::new(), memo: HashMap::new(), arena: Vec::new() };
    loop {
        let at = m.pos;
        if m.arena.len() > MAX_ITEMS
            || m.stack.len() > MAX_ITEMS
            || m.marks.len() > MAX_ITEMS
            || m.memo.len() > MAX_ITEMS
        {
            let message = format!("more than {MAX_ITEMS} objects; a state dict has a few per tensor");
            return Err(PickleError { at, message });
        }
        match m.step() {
            Ok(Some(root)) => return Ok(Pickle { arena: m.arena, root }),
            Ok(None) => {}
            Err(message) => return Err(PickleError { at, message }),
        }
    }
}

struct Machine<'a> {
    bytes: &'a [u8],
    pos: usize,
    stack: Vec<Val>,
    marks: Vec<usize>,
    memo: HashMap<u32, Val>,
    arena: Vec<Obj>,
}

impl<'a> Machine<'a> {
    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(format!("declares {n} bytes, {left} remain (truncated or corrupt)"));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self) -> Res<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }

    fn len_u64(&mut self, n: u64) -> Res<usize> {
        usize::try_from(n).map_err(|_| format!("declares {n} bytes"))
    }

    fn line(&mut self) -> Res<&'a str> {
        let rest = &self.bytes[self.pos..];
        let end = rest.iter().position(|&b| b == b'\n').ok_or("a line without its newline (truncated)")?;
        let s = std::str::from_utf8(&rest[..end]).map_err(|_| "a global name that is not UTF-8")?;
        self.pos += end + 1;
        Ok(s)
    }

    fn alloc(&mut self, o: Obj) -> Val {
        self.arena.push(o);
        Val::Obj(self.arena.len() - 1)
    }

    fn push_obj(&mut self, o: Obj) {
        let v = self.alloc(o);
        self.stack.push(v);
    }

    fn pop(&mut self) -> Res<Val> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err("pops past a mark".into());
        }
        self.stack.pop().ok_or_else(|| "pops an empty stack".into())
    }

    fn top(&self) -> Res<Val> {
        self.stack.last().copied().ok_or_else(|| "reads an empty stack".into())
    }

    fn pop_mark(&mut self) -> Res<Vec<Val>> {
        let m = self.marks.pop().ok_or("no mark to pop to")?;
        Ok(self.stack.split_off(m))
    }

    fn string(&mut self, n: usize) -> Res<()> {
        let s = String::from_utf8_lossy(self.take(n)?).into_owned();
        self.push_obj(Obj::Str(s));
        Ok(())
    }

    fn bytes_obj(&mut self, n: usize) -> Res<()> {
        self.take(n)?;
        self.push_obj(Obj::Bytes(n));
        Ok(())
    }

    fn memo_get(&self, i: u32) -> Res<Val> {
        self.memo.get(&i).copied().ok_or_else(|| format!("memo entry {i} was never stored"))
    }

    fn container(&mut self, at: Val) -> Res<&mut Obj> {
        match at {
            Val::Obj(i) => Ok(&mut self.arena[i]),
            _ => Err("adds items to a scalar".into()),
        }
    }

    fn append(&mut self, list: Val, items: Vec<Val>) -> Res<()> {
        match self.container(list)? {
            Obj::List(l) => {
                l.extend(items);
                Ok(())
            }
            // A list subclass rebuilt by a call the reader does not model: its items do not matter.
            Obj::Call { .. } => Ok(()),
            other => Err(format!("appends to a {}", kind(other))),
        }
    }

    fn set_items(&mut self, dict: Val, items: Vec<Val>) -> Res<()> {
        if !items.len().is_multiple_of(2) {
            return Err("an odd number of items for a dict".into());
        }
        match self.container(dict)? {
            Obj::Dict(d) => {
                d.extend(items.chunks(2).map(|kv| (kv[0], kv[1])));
                Ok(())
            }
            Obj::Call { .. } => Ok(()),
            other => Err(format!("sets items on a {}", kind(other))),
        }
    }

    /// Run one opcode; `Some` at `STOP`.
    fn step(&mut self) -> Res<Option<Val>> {
        let [op] = self.arr::<1>().map_err(|_| "ends without STOP (truncated)".to_string())?;
        match op {
            0x80 => {
                let [v] = self.arr()?;
                if v > 5 {
                    return Err(format!("pickle protocol {v} (5 is the newest)"));
                }
            }
            0x95 => {
                self.arr::<8>()?; // FRAME: a length hint
            }
            b'.' => return self.pop().map(Some),
            b'(' => self.marks.push(self.stack.len()),
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let v = self.top()?;
                self.stack.push(v);
            }
            b'N' => self.stack.push(Val::None),
            0x88 => self.stack.push(Val::Bool(true)),
            0x89 => self.stack.push(Val::Bool(false)),
            b'J' => {
                let v = i32::from_le_bytes(self.arr()?);
                self.stack.push(Val::Int(v as i64));
            }
            b'K' => {
                let [v] = self.arr()?;
                self.stack.push(Val::Int(v as i64));
            }
            b'M' => {
                let v = u16::from_le_bytes(self.arr()?);
                self.stack.push(Val::Int(v as i64));
            }
            0x8a => {
                let [n] = self.arr()?;
                let b = self.take(n as usize)?;
                if n > 8 {
                    return Err(format!("an integer of {n} bytes (at most 8 are read)"));
                }
                let mut v: i64 = 0;
                for (i, &x) in b.iter().enumerate() {
                    v |= (x as i64) << (8 * i);
                }
                if n > 0 && n < 8 && b[n as usize - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n as u32);
                }
                self.stack.push(Val::Int(v));
            }
            b'G' => {
                let v = f64::from_be_bytes(self.arr()?);
                self.stack.push(Val::Float(v));
            }
            b'X' => {
                let n = u32::from_le_bytes(self.arr()?) as usize;
                self.string(n)?;
            }
            0x8c | b'U' => {
                let [n] = self.arr()?;
                self.string(n as usize)?;
            }
            0x8d => {
                let n = u64::from_le_bytes(self.arr()?);
                let n = self.len_u64(n)?;
                self.string(n)?;
            }
            b'T' => {
                let n = i32::from_le_bytes(self.arr()?);
                let n = usize::try_from(n).map_err(|_| format!("a string of {n} bytes"))?;
                self.string(n)?;
            }
            b'B' => {
                let n = u32::from_le_bytes(self.arr()?) as usize;
                self.bytes_obj(n)?;
            }
            b'C' => {
                let [n] = self.arr()?;
                self.bytes_obj(n as usize)?;
            }
            0x8e => {
                let n = u64::from_le_bytes(self.arr()?);
                let n = self.len_u64(n)?;
                self.bytes_obj(n)?;
            }
            b')' => self.push_obj(Obj::Tuple(Vec::new())),
            b't' => {
                let items = self.pop_mark()?;
                self.push_obj(Obj::Tuple(items));
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if self.stack.len() < n || self.marks.last().is_some_and(|&m| m > self.stack.len() - n) {
                    return Err(format!("a tuple of {n} with fewer items on the stack"));
                }
                let items = self.stack.split_off(self.stack.len() - n);
                self.push_obj(Obj::Tuple(items));
            }
            b']' => self.push_obj(Obj::List(Vec::new())),
            b'l' => {
                let items = self.pop_mark()?;
                self.push_obj(Obj::List(items));
            }
            b'a' => {
                let item = self.pop()?;
                let list = self.top()?;
                self.append(list, vec![item])?;
            }
            b'e' => {
                let items = self.pop_mark()?;
                let list = self.top()?;
                self.append(list, items)?;
            }
            b'}' => self.push_obj(Obj::Dict(Vec::new())),
            b'd' => {
                let items = self.pop_mark()?;
                let v = self.alloc(Obj::Dict(Vec::new()));
                self.set_items(v, items)?;
                self.stack.push(v);
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                let dict = self.top()?;
                self.set_items(dict, vec![key, value])?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                let dict = self.top()?;
                self.set_items(dict, items)?;
            }
            b'q' => {
                let [i] = self.arr()?;
                let v = self.top()?;
                self.memo.insert(i as u32, v);
            }
            b'r' => {
                let i = u32::from_le_bytes(self.arr()?);
                let v = self.top()?;
                self.memo.insert(i, v);
            }
            0x94 => {
                let i = u32::try_from(self.memo.len()).map_err(|_| "too many memo entries")?;
                let v = self.top()?;
                self.memo.insert(i, v);
            }
            b'h' => {
                let [i] = self.arr()?;
                let v = self.memo_get(i as u32)?;
                self.stack.push(v);
            }
            b'j' => {
                let i = u32::from_le_bytes(self.arr()?);
                let v = self.memo_get(i)?;
                self.stack.push(v);
            }
            b'c' => {
                let module = self.line()?.to_string();
                let name = self.line()?.to_string();
                self.push_obj(Obj::Global { module, name });
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Some(module), Some(name)) = (self.str_of(module), self.str_of(name)) else {
                    return Err("STACK_GLOBAL of something other than two strings".into());
                };
                self.push_obj(Obj::Global { module, name });
            }
            b'Q' => {
                let pid = self.pop()?;
                let storage = self.storage(pid)?;
                self.push_obj(storage);
            }
            b'R' => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let v = self.reduce(callable, args)?;
                self.stack.push(v);
            }
            0x81 => {
                let _args = self.pop()?;
                let callable = self.pop()?;
                self.push_obj(Obj::Call { callable });
            }
            0x92 => {
                let _kwargs = self.pop()?;
                let _args = self.pop()?;
                let callable = self.pop()?;
                self.push_obj(Obj::Call { callable });
            }
            b'b' => {
                // BUILD sets an object's state (an OrderedDict's `_metadata`): not needed.
                self.pop()?;
                self.top()?;
            }
            other => return Err(format!("opcode 0x{other:02x}, which torch.save does not write")),
        }
        Ok(None)
    }

    fn str_of(&self, v: Val) -> Option<String> {
        match v {
            Val::Obj(i) => match &self.arena[i] {
                Obj::Str(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        }
    }

    fn tuple(&self, v: Val) -> Option<&[Val]> {
        match v {
            Val::Obj(i) => match &self.arena[i] {
                Obj::Tuple(t) => Some(t),
                _ => None,
            },
            _ => None,
        }
    }

    /// A persistent id: `('storage', <storage class>, key, location, numel)`.
    fn storage(&self, pid: Val) -> Res<Obj> {
        let bad = || "a persistent id that is not ('storage', type, key, location, numel)".to_string();
        let t = self.tuple(pid).ok_or_else(bad)?;
        if t.len() < 5 || self.str_of(t[0]).as_deref() != Some("storage") {
            return Err(bad());
        }
        let kind = match t[1] {
            Val::Obj(i) => match &self.arena[i] {
                Obj::Global { name, .. } => name.clone(),
                Obj::Str(s) => s.clone(),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        let key = self.str_of(t[2]).ok_or_else(bad)?;
        let numel = match t[4] {
            Val::Int(n) => u64::try_from(n).map_err(|_| format!("a storage of {n} elements"))?,
            _ => return Err(bad()),
        };
        Ok(Obj::Storage { kind, key, numel })
    }

    fn ints(&self, v: Val, what: &str) -> Res<Vec<u64>> {
        let t = self.tuple(v).ok_or_else(|| format!("a tensor whose {what} is not a tuple"))?;
        t.iter()
            .map(|x| match x {
                Val::Int(n) => u64::try_from(*n).map_err(|_| format!("a tensor {what} of {n}")),
                _ => Err(format!("a tensor {what} that is not a tuple of integers")),
            })
            .collect()
    }

    fn reduce(&mut self, callable: Val, args: Val) -> Res<Val> {
        let name = match callable {
            Val::Obj(i) => match &self.arena[i] {
                Obj::Global { module, name } => Some((module.as_str(), name.as_str())),
                _ => None,
            },
            _ => None,
        };
        match name {
            Some(("collections", "OrderedDict")) => Ok(self.alloc(Obj::Dict(Vec::new()))),
            Some(("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor")) => {
                let a = self.tuple(args).ok_or("tensor arguments that are not a tuple")?.to_vec();
                if a.len() < 4 {
                    return Err(format!("_rebuild_tensor with {} arguments (4 or more expected)", a.len()));
                }
                let storage = match a[0] {
                    Val::Obj(i) if matches!(self.arena[i], Obj::Storage { .. }) => i,
                    _ => return Err("a tensor whose storage is not a storage".into()),
                };
                let offset = match a[1] {
                    Val::Int(n) => u64::try_from(n).map_err(|_| format!("a tensor storage offset of {n}"))?,
                    _ => return Err("a tensor storage offset that is not an integer".into()),
                };
                let shape = self.ints(a[2], "shape")?;
                let strides = self.ints(a[3], "stride")?;
                if shape.len() != strides.len() {
                    return Err(format!("a tensor of {} dimensions with {} strides", shape.len(), strides.len()));
                }
                Ok(self.alloc(Obj::Tensor(TensorView { storage, offset, shape, strides })))
            }
            Some(("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state")) => {
                let a = self.tuple(args).ok_or("parameter arguments that are not a tuple")?;
                a.first().copied().ok_or_else(|| "a parameter without its tensor".into())
            }
            _ => Ok(self.alloc(Obj::Call { callable })),
        }
    }
}

fn kind(o: &Obj) -> &'static str {
    match o {
        Obj::Str(_) => "string",
        Obj::Bytes(_) => "bytes",
        Obj::Tuple(_) => "tuple",
        Obj::List(_) => "list",
        Obj::Dict(_) => "dict",
        Obj::Global { .. } => "global",
        Obj::Call { .. } => "call",
        Obj::Storage { .. } => "storage",
        Obj::Tensor(_) => "tensor",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_dict_parses() {
        // {'a': 1, 'b': [2.5, None]} in protocol 2, as pickle.dumps writes it.
        let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01K\x01X\x01\x00\x00\x00bq\x02]q\x03(G@\x04\x00\x00\x00\x00\x00\x00Neu.";
        let p = parse(bytes).unwrap();
        let d = p.dict(p.root).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(p.str(d[0].0), Some("a"));
        assert_eq!(d[0].1, Val::Int(1));
        match p.obj(d[1].1) {
            Some(Obj::List(l)) => assert_eq!(l, &vec![Val::Float(2.5), Val::None]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lengths_past_the_end_nesting_and_memo_reuse_stay_bounded() {
        let err = parse(b"\x80\x02X\xff\xff\xff\xffabc.").unwrap_err();
        assert_eq!(err.at, 2);
        assert!(err.message.contains("declares 4294967295 bytes, 4 remain"), "{err}");
        // 200,000 nested tuples: no recursion anywhere, dropped flat.
        let mut deep = b"\x80\x02".to_vec();
        deep.extend(std::iter::repeat_n(b'(', 200_000));
        deep.extend(std::iter::repeat_n(b't', 200_000));
        deep.push(b'.');
        let p = parse(&deep).unwrap();
        assert_eq!(p.arena.len(), 200_000);
        // A list referenced from the memo 100,000 times costs an index each, not a copy.
        let mut bomb = b"\x80\x02](K\x01K\x02K\x03eq\x00](".to_vec();
        for _ in 0..100_000 {
            bomb.extend(b"h\x00");
        }
        bomb.extend(b"e.");
        let p = parse(&bomb).unwrap();
        assert_eq!(p.arena.len(), 2);
        // Past the cap: refused, not held.
        let mut flat = b"\x80\x02(".to_vec();
        flat.extend(b"K\x01".repeat(MAX_ITEMS + 1));
        flat.extend(b"l.");
        assert!(parse(&flat).unwrap_err().message.contains("more than 2000000 objects"));
        assert!(parse(b"\x80\x02K\x01").unwrap_err().message.contains("without STOP"));
        assert!(parse(b"\x80\x02h\x07.").unwrap_err().message.contains("memo entry 7"));
        assert!(parse(b"\x80\x02K\x01(a.").unwrap_err().message.contains("past a mark"));
        assert!(parse(b"\x80\x02\x8a\x09000000000.").unwrap_err().message.contains("9 bytes"));
    }

    #[test]
    fn long1_is_twos_complement() {
        let p = parse(b"\x80\x02\x8a\x02\xff\xff.").unwrap();
        assert_eq!(p.root, Val::Int(-1));
        let p = parse(b"\x80\x02\x8a\x02\xff\x7f.").unwrap();
        assert_eq!(p.root, Val::Int(32767));
    }
}
