//! An ONNX graph under construction, owning its names and weights, encoded to the ONNX protobuf
//! through `onnx-rs` (whose message types borrow them) only when written.

use onnx_rs::ast::{
    Attribute, AttributeType, DataType, Dimension, Graph, Model, Node, OpType, OperatorSetId, StringStringEntry,
    TensorProto, TensorShape, TensorShapeDimension, TensorTypeProto, TypeProto, TypeValue, ValueInfo,
};

/// The ONNX operator set the exported graphs use (onnxruntime and onnxruntime-web run it).
pub const OPSET: i64 = 17;
/// The ONNX IR version of opset 17.
const IR_VERSION: i64 = 8;

/// A node attribute.
#[derive(Debug, Clone)]
pub enum Attr {
    /// One integer.
    Int(&'static str, i64),
    /// Integers.
    Ints(&'static str, Vec<i64>),
    /// One float.
    Float(&'static str, f32),
    /// A string.
    Str(&'static str, &'static str),
}

#[derive(Debug)]
struct OwnedNode {
    op: &'static str,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attrs: Vec<Attr>,
}

#[derive(Debug)]
enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

/// A graph input or output: its name, element type and dimensions (a `&str` dimension is
/// dynamic, named).
#[derive(Debug, Clone)]
pub struct Io {
    /// The tensor's name.
    pub name: String,
    /// Float (f32) or not (int64).
    pub float: bool,
    /// Fixed sizes or symbolic names.
    pub dims: Vec<Dim>,
}

/// One dimension of an [`Io`].
#[derive(Debug, Clone)]
pub enum Dim {
    /// A fixed size.
    Fixed(i64),
    /// A dynamic axis with a name (`batch`, `frames`).
    Named(&'static str),
}

/// Nodes and initializers in topological order (each node is appended after its inputs exist).
#[derive(Debug, Default)]
pub struct Builder {
    nodes: Vec<OwnedNode>,
    weights: Vec<(String, Vec<i64>, Data)>,
    next: usize,
}

impl Builder {
    fn fresh(&mut self, hint: &str) -> String {
        self.next += 1;
        format!("{hint}_{}", self.next)
    }

    /// Append `op` on `inputs` with `attrs`; returns the name of its (first) output.
    pub fn op(&mut self, op: &'static str, inputs: &[&str], attrs: Vec<Attr>) -> String {
        self.op_outputs(op, inputs, attrs, 1).remove(0)
    }

    /// Append `op` with `outputs` outputs; returns their names.
    pub fn op_outputs(&mut self, op: &'static str, inputs: &[&str], attrs: Vec<Attr>, outputs: usize) -> Vec<String> {
        let outputs: Vec<String> = (0..outputs).map(|_| self.fresh(op)).collect();
        let inputs = inputs.iter().map(|s| s.to_string()).collect();
        self.nodes.push(OwnedNode { op, inputs, outputs: outputs.clone(), attrs });
        outputs
    }

    /// Like [`Self::op`], the output named `name` (a graph output).
    pub fn op_named(&mut self, name: &str, op: &'static str, inputs: &[&str], attrs: Vec<Attr>) -> String {
        let inputs = inputs.iter().map(|s| s.to_string()).collect();
        self.nodes.push(OwnedNode { op, inputs, outputs: vec![name.into()], attrs });
        name.into()
    }

    /// An f32 initializer of shape `dims` (row-major `data`).
    pub fn f32s(&mut self, hint: &str, dims: &[usize], data: Vec<f32>) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), data.len(), "{hint}");
        let name = self.fresh(hint);
        self.weights.push((name.clone(), dims.iter().map(|&d| d as i64).collect(), Data::F32(data)));
        name
    }

    /// A scalar f32 initializer.
    pub fn scalar(&mut self, v: f32) -> String {
        self.f32s("const", &[], vec![v])
    }

    /// A 1-D int64 initializer (shapes, axes, indices).
    pub fn i64s(&mut self, data: &[i64]) -> String {
        let name = self.fresh("ints");
        self.weights.push((name.clone(), vec![data.len() as i64], Data::I64(data.to_vec())));
        name
    }

    /// A scalar int64 initializer.
    pub fn i64_scalar(&mut self, v: i64) -> String {
        let name = self.fresh("int");
        self.weights.push((name.clone(), vec![], Data::I64(vec![v])));
        name
    }

    /// `x` with size-1 axes inserted at `axes`.
    pub fn unsqueeze(&mut self, x: &str, axes: &[i64]) -> String {
        let axes = self.i64s(axes);
        self.op("Unsqueeze", &[x, &axes], vec![])
    }

    /// `x[start..end]` along `axis`.
    pub fn slice(&mut self, x: &str, start: i64, end: i64, axis: i64) -> String {
        let (s, e, a) = (self.i64s(&[start]), self.i64s(&[end]), self.i64s(&[axis]));
        self.op("Slice", &[x, &s, &e, &a], vec![])
    }

    /// Nodes so far.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The model's protobuf bytes: this graph with `inputs`, `outputs` and `metadata`
    /// (key/value strings in the model's `metadata_props`).
    pub fn encode(&self, name: &str, inputs: &[Io], outputs: &[Io], metadata: &[(String, String)]) -> Vec<u8> {
        let nodes = self
            .nodes
            .iter()
            .map(|n| Node {
                input: n.inputs.iter().map(String::as_str).collect(),
                output: n.outputs.iter().map(String::as_str).collect(),
                name: n.outputs[0].as_str(),
                op_type: OpType::from(n.op),
                attribute: n.attrs.iter().map(attribute).collect(),
                ..Default::default()
            })
            .collect();
        let initializer = self
            .weights
            .iter()
            .map(|(name, dims, data)| match data {
                Data::F32(v) => TensorProto::from_f32(name, dims.clone(), v.clone()),
                Data::I64(v) => TensorProto::from_i64(name, dims.clone(), v.clone()),
            })
            .collect();
        let model = Model {
            ir_version: IR_VERSION,
            opset_import: vec![OperatorSetId { domain: "", version: OPSET }],
            producer_name: "signflow",
            producer_version: env!("CARGO_PKG_VERSION"),
            graph: Some(Graph {
                node: nodes,
                name,
                initializer,
                input: inputs.iter().map(value_info).collect(),
                output: outputs.iter().map(value_info).collect(),
                ..Default::default()
            }),
            metadata_props: metadata.iter().map(|(k, v)| StringStringEntry { key: k, value: v }).collect(),
            ..Default::default()
        };
        onnx_rs::encode(&model)
    }
}

fn attribute(a: &Attr) -> Attribute<'_> {
    match a {
        Attr::Int(name, i) => Attribute { name, r#type: AttributeType::Int, i: *i, ..Default::default() },
        Attr::Ints(name, v) => Attribute { name, r#type: AttributeType::Ints, ints: v.clone(), ..Default::default() },
        Attr::Float(name, f) => Attribute { name, r#type: AttributeType::Float, f: *f, ..Default::default() },
        Attr::Str(name, v) => Attribute { name, r#type: AttributeType::String, s: v.as_bytes(), ..Default::default() },
    }
}

fn value_info(io: &Io) -> ValueInfo<'_> {
    let dim = io
        .dims
        .iter()
        .map(|d| TensorShapeDimension {
            value: match d {
                Dim::Fixed(n) => Dimension::Value(*n),
                Dim::Named(s) => Dimension::Param(s),
            },
            denotation: "",
        })
        .collect();
    ValueInfo {
        name: &io.name,
        r#type: Some(TypeProto {
            value: Some(TypeValue::Tensor(TensorTypeProto {
                elem_type: if io.float { DataType::Float } else { DataType::Int64 },
                shape: Some(TensorShape { dim }),
            })),
            denotation: "",
        }),
        ..Default::default()
    }
}
