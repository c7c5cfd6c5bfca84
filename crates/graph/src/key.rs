//! [`StructuralKey`]: a graph's structure as words, for caches keyed by what a graph does
//! rather than by the tensors it runs on.

use std::hash::{BuildHasher, Hash, Hasher};

use switchboard_dispatcher::{IValue, OperatorHandle};

use crate::graph::Graph;
use crate::node::{Arg, Node, NodeKind, Source, TensorMeta, Value};

// Note [Structural keys]
// Two graphs get the same key exactly when they would run the same calls: the same operators
// (by identity of the registered operator) in the same order, reading the same values, with
// equal constant arguments (floats by bit pattern), the same output sources, and inputs of the
// same dtype, sizes, strides, offset and device. The metadata of call outputs is left out: it
// follows from the rest (shape functions are deterministic). The words are compared in full
// on lookup, so a hash collision can never return another graph's plan.

/// A graph's structure (Note [Structural keys]): hashed once, compared word by word.
#[derive(Clone, Debug)]
pub struct StructuralKey {
    words: Vec<u64>,
    hash: u64,
}

impl PartialEq for StructuralKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.words == other.words
    }
}

impl Eq for StructuralKey {}

impl Hash for StructuralKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl StructuralKey {
    /// The key of `graph`, restricted to the nodes marked in `keep` (all when `None`; value
    /// references are renumbered over the kept nodes, so dead nodes do not change the key).
    pub fn of(graph: &Graph, keep: Option<&[bool]>) -> StructuralKey {
        let n = graph.nodes.len();
        let kept = |i: usize| keep.is_none_or(|k| k[i]);
        let mut renumber = vec![u32::MAX; n];
        let mut next = 0u32;
        let mut w = Encoder::default();
        for (i, node) in graph.nodes().enumerate() {
            if !kept(i) {
                continue;
            }
            renumber[i] = next;
            next += 1;
            encode_node(&mut w, node, |v| {
                (u64::from(renumber[v.node.index()]) << 32) | u64::from(v.output)
            });
        }
        w.word(0xfeed);
        for v in &graph.outputs {
            w.word((u64::from(renumber[v.node.index()]) << 32) | u64::from(v.output));
        }
        w.finish()
    }

    /// The number of words (a measure of the graph's size).
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the key is empty (never: a key has at least its terminator).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The 64-bit hash.
    pub fn hash64(&self) -> u64 {
        self.hash
    }
}

/// Words of a key under construction.
#[derive(Default)]
pub(crate) struct Encoder {
    pub(crate) words: Vec<u64>,
}

impl Encoder {
    #[inline]
    pub(crate) fn word(&mut self, w: u64) {
        self.words.push(w);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u64);
        for chunk in b.chunks(8) {
            let mut a = [0u8; 8];
            a[..chunk.len()].copy_from_slice(chunk);
            self.word(u64::from_le_bytes(a));
        }
    }

    fn ints(&mut self, v: &[i64]) {
        self.word(v.len() as u64);
        self.words.extend(v.iter().map(|x| *x as u64));
    }

    pub(crate) fn finish(self) -> StructuralKey {
        let hash = foldhash::fast::FixedState::with_seed(0x005b_0a7d).hash_one(&self.words);
        StructuralKey {
            hash,
            words: self.words,
        }
    }
}

/// The identity of an operator as a word (its registration's address: stable while the
/// handle lives, and graphs hold their handles).
pub(crate) fn op_word(op: &OperatorHandle) -> u64 {
    op.id() as u64
}

fn encode_meta(w: &mut Encoder, m: &TensorMeta) {
    w.word(m.dtype as u64);
    w.ints(&m.sizes);
    w.ints(&m.strides);
    w.word(m.storage_offset as u64);
    w.word((m.device.ty as u64) << 32 | m.device.index.map_or(u64::from(u32::MAX), |i| i as u64));
}

/// Encodes one node; `value` gives the word of a value it reads.
pub(crate) fn encode_node(w: &mut Encoder, node: Node<'_>, value: impl Fn(Value) -> u64) {
    match node.kind() {
        NodeKind::Input { .. } => {
            w.word(1);
            encode_meta(w, &node.outputs()[0].meta);
        }
        NodeKind::Call { op } => {
            let args = node.args();
            w.word(2);
            w.word(op_word(op));
            w.word(args.len() as u64);
            for a in args {
                match a {
                    Arg::Value(v) => {
                        w.word(10);
                        w.word(value(*v));
                    }
                    Arg::Values(vs) => {
                        w.word(11);
                        w.word(vs.len() as u64);
                        for v in vs {
                            w.word(value(*v));
                        }
                    }
                    Arg::OptionalValues(vs) => {
                        w.word(12);
                        w.word(vs.len() as u64);
                        for v in vs {
                            w.word(v.map_or(u64::MAX, &value));
                        }
                    }
                    Arg::Const(c) => {
                        w.word(13);
                        encode_ivalue(w, c);
                    }
                    Arg::Number(n) => {
                        w.word(14);
                        encode_ivalue(w, &Arg::number_ivalue(*n));
                    }
                }
            }
            w.word(node.outputs().len() as u64);
            for o in node.outputs() {
                w.word(match o.source {
                    Source::Return(i) => u64::from(i),
                    Source::ReturnItem(i, j) => 1 << 62 | u64::from(i) << 32 | u64::from(j),
                    Source::Argument(i) => 2 << 62 | u64::from(i),
                });
            }
        }
    }
}

/// Encodes a constant (tensors never appear here, see `Graph::add_call`).
pub(crate) fn encode_ivalue(w: &mut Encoder, c: &IValue) {
    match c {
        IValue::None => w.word(0),
        IValue::Tensor(t) => {
            // Not a constant a graph holds; encoded by identity so that keys stay exact.
            w.word(1);
            w.word(std::ptr::from_ref::<switchboard_tensor::TensorImpl>(t) as u64);
        }
        IValue::Int(v) => {
            w.word(2);
            w.word(*v as u64);
        }
        IValue::Double(v) => {
            w.word(3);
            w.word(v.to_bits());
        }
        IValue::Bool(v) => {
            w.word(4);
            w.word(u64::from(*v));
        }
        IValue::Str(s) => {
            w.word(5);
            w.bytes(s.as_bytes());
        }
        IValue::ScalarType(v) => {
            w.word(6);
            w.word(*v as u64);
        }
        IValue::Layout(v) => {
            w.word(7);
            w.word(*v as u64);
        }
        IValue::Device(d) => {
            w.word(8);
            w.word((d.ty as u64) << 32 | d.index.map_or(u64::from(u32::MAX), |i| i as u64));
        }
        IValue::MemoryFormat(v) => {
            w.word(9);
            w.word(*v as u64);
        }
        IValue::Generator(g) => {
            w.word(10);
            w.bytes(format!("{g:?}").as_bytes());
        }
        IValue::IntList(v) => {
            w.word(11);
            w.ints(v);
        }
        IValue::DoubleList(v) => {
            w.word(12);
            w.word(v.len() as u64);
            w.words.extend(v.iter().map(|x| x.to_bits()));
        }
        IValue::BoolList(v) => {
            w.word(13);
            w.word(v.len() as u64);
            w.words.extend(v.iter().map(|x| u64::from(*x)));
        }
        IValue::TensorList(v) => {
            w.word(14);
            w.word(v.len() as u64);
            for t in v {
                encode_ivalue(w, &IValue::Tensor(t.clone()));
            }
        }
        IValue::OptionalTensorList(v) => {
            w.word(15);
            w.word(v.len() as u64);
            for t in v {
                encode_ivalue(w, &t.clone().map_or(IValue::None, IValue::Tensor));
            }
        }
        IValue::Tuple(v) | IValue::GenericList(v) => {
            w.word(if matches!(c, IValue::Tuple(_)) {
                16
            } else {
                17
            });
            w.word(v.len() as u64);
            for x in v {
                encode_ivalue(w, x);
            }
        }
        IValue::Object(o) => {
            // By identity, as tensors: an object's state is opaque (a process group, a work),
            // and the graph holding the constant keeps the object, so its address stays its own.
            w.word(18);
            w.word(std::sync::Arc::as_ptr(o) as u64);
        }
    }
}
