//! The message-passing layers and the encoder pass. Tensors here carry no batch dimension: nodes
//! are [N, H] and edges [N, K, ..], where N is the residues (encoder) or the designs being decoded
//! one position each (decoder).

use candle_core::{DType, Device, Module, Tensor};

use super::features::Graph;
use super::weights::{DecoderLayer, EncoderLayer, FeedForward, MessageMlp, RBF_FEATURES, Weights};
use super::{HIDDEN, MpnnError};

/// Messages are summed over neighbours and divided by this fixed constant, not averaged.
const MESSAGE_SCALE: f64 = 30.0;

impl FeedForward {
    fn forward(&self, nodes: &Tensor) -> candle_core::Result<Tensor> {
        self.output.forward(&self.input.forward(nodes)?.gelu_erf()?)
    }
}

impl MessageMlp {
    /// The MLP over [h_i, context_ij] for every edge. Its first layer is applied to h_i once per
    /// node and broadcast over the neighbours, which spares both the concatenation and K-fold work.
    fn forward(&self, nodes: &Tensor, context: &Tensor) -> candle_core::Result<Tensor> {
        let own = self.own.forward(nodes)?.unsqueeze(1)?;
        let first = self
            .context
            .forward(context)?
            .broadcast_add(&own)?
            .gelu_erf()?;
        self.output
            .forward(&self.hidden.forward(&first)?.gelu_erf()?)
    }
}

/// Residual update of node states with summed messages, then the feed-forward block.
fn update_nodes(
    nodes: &Tensor,
    messages: &Tensor,
    norms: [&candle_nn::LayerNorm; 2],
    feed_forward: &FeedForward,
) -> candle_core::Result<Tensor> {
    let nodes = norms[0].forward(&(nodes + (messages.sum(1)? / MESSAGE_SCALE)?)?)?;
    norms[1].forward(&(&nodes + feed_forward.forward(&nodes)?)?)
}

/// [e_ij, h_j] for every edge, with h_j gathered by neighbour index.
fn edge_context(
    nodes: &Tensor,
    edges: &Tensor,
    neighbours: &Tensor,
) -> candle_core::Result<Tensor> {
    let (len, k, hidden) = edges.dims3()?;
    let neighbour_nodes = nodes
        .index_select(neighbours, 0)?
        .reshape((len, k, hidden))?;
    Tensor::cat(&[edges, &neighbour_nodes], 2)
}

impl EncoderLayer {
    fn forward(
        &self,
        nodes: &Tensor,
        edges: &Tensor,
        neighbours: &Tensor,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let messages = self
            .node_message
            .forward(nodes, &edge_context(nodes, edges, neighbours)?)?;
        let nodes = update_nodes(
            nodes,
            &messages,
            [&self.node_norm, &self.feed_forward_norm],
            &self.feed_forward,
        )?;
        let edge_update = self
            .edge_message
            .forward(&nodes, &edge_context(&nodes, edges, neighbours)?)?;
        let edges = self.edge_norm.forward(&(edges + edge_update)?)?;
        Ok((nodes, edges))
    }
}

impl DecoderLayer {
    /// New states [N, H] of the nodes being decoded, from their states and the context part of
    /// the message MLP's first layer already applied to each of their edges, [N, K, H].
    pub(crate) fn forward(
        &self,
        nodes: &Tensor,
        first_context: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let own = self.own.forward(nodes)?.unsqueeze(1)?;
        let first = first_context.broadcast_add(&own)?.gelu_erf()?;
        let messages = self
            .output
            .forward(&self.hidden.forward(&first)?.gelu_erf()?)?;
        update_nodes(
            nodes,
            &messages,
            [&self.node_norm, &self.feed_forward_norm],
            &self.feed_forward,
        )
    }
}

/// The encoder's output, shared by every decoding of one structure.
pub(crate) struct Encoded {
    pub len: usize,
    pub neighbours: usize,
    pub neighbour_index: Vec<u32>,
    /// Edge states, [L·K, H].
    pub edges: Tensor,
    /// Node states, [L, H].
    pub nodes: Tensor,
}

impl Weights {
    /// Embeds the graph's edges and runs the encoder layers over it.
    pub(crate) fn encode(&self, graph: &Graph, device: &Device) -> Result<Encoded, MpnnError> {
        let len = graph.neighbour_index.len() / graph.neighbours.max(1);
        let k = graph.neighbours;
        let edge_count = len * k;
        let neighbours = Tensor::from_slice(&graph.neighbour_index, edge_count, device)?;
        let classes = Tensor::from_slice(&graph.position_class, edge_count, device)?;
        // A linear layer over a one-hot class is a row lookup of its transposed weight.
        let positional = self
            .position_table
            .index_select(&classes, 0)?
            .broadcast_add(&self.position_bias)?;
        let rbf = Tensor::from_slice(&graph.rbf, (edge_count, RBF_FEATURES), device)?;
        let raw_edges = Tensor::cat(&[&positional, &rbf], 1)?;
        let edges = self
            .edge_norm
            .forward(&self.edge_embedding.forward(&raw_edges)?)?;
        let mut edges = self.edge_input.forward(&edges)?.reshape((len, k, HIDDEN))?;
        let mut nodes = Tensor::zeros((len, HIDDEN), DType::F32, device)?;
        for layer in &self.encoder {
            (nodes, edges) = layer.forward(&nodes, &edges, &neighbours)?;
        }
        Ok(Encoded {
            len,
            neighbours: k,
            neighbour_index: graph.neighbour_index.clone(),
            edges: edges.reshape((edge_count, HIDDEN))?,
            nodes,
        })
    }
}
