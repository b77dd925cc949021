//! Reading the v_48_020 checkpoint (a PyTorch zip whose `model_state_dict` holds the weights) into
//! the layers the model runs. Every tensor's name, dtype and shape is checked against what the
//! architecture needs before its bytes are read, so a wrong or damaged file is a typed error and
//! never an oversized allocation or a shape panic half-way through a forward pass.

use std::collections::HashMap;
use std::path::Path;

use candle_core::pickle::{PthTensors, TensorInfo};
use candle_core::{DType, Device, Tensor};
use candle_nn::{LayerNorm, Linear, Module};

use super::{ALPHABET_SIZE, HIDDEN, MpnnError};

/// Position-wise feed-forward width inside each encoder and decoder layer.
const FEED_FORWARD: usize = 4 * HIDDEN;
/// Positional classes: offsets clipped to -32..=32, plus one for "different chain".
pub(crate) const POSITION_CLASSES: usize = 66;
/// Width of the positional-offset embedding that is concatenated with the RBFs.
pub(crate) const POSITION_EMBEDDING: usize = 16;
/// 25 atom pairs times 16 radial basis functions.
pub(crate) const RBF_FEATURES: usize = 25 * 16;
const LAYERS: usize = 3;
/// torch.nn.LayerNorm's default epsilon, which the checkpoint was trained with.
const LAYER_NORM_EPS: f64 = 1e-5;

pub(crate) struct FeedForward {
    pub input: Linear,
    pub output: Linear,
}

/// A three-layer MLP over [h_i, context_ij] for every edge i→j, its first layer split in two.
pub(crate) struct MessageMlp {
    /// First layer's h_i part, with the bias.
    pub own: Linear,
    /// First layer's context part.
    pub context: Linear,
    pub hidden: Linear,
    pub output: Linear,
}

pub(crate) struct EncoderLayer {
    /// Node messages over [h_i, e_ij, h_j].
    pub node_message: MessageMlp,
    /// Edge updates over the same concatenation, after the node update.
    pub edge_message: MessageMlp,
    pub node_norm: LayerNorm,
    pub feed_forward_norm: LayerNorm,
    pub edge_norm: LayerNorm,
    pub feed_forward: FeedForward,
}

/// A decoder layer. Its message MLP runs over [h_i, e_ij, s_j, h_j]; the first layer is kept as
/// four blocks so that the e, s and h parts can be applied once to each edge, token and node state
/// instead of once per edge and step (see the decoder).
pub(crate) struct DecoderLayer {
    /// First layer's h_i block, with the bias.
    pub own: Linear,
    pub edge_context: Linear,
    /// First layer's s_j block applied to each token's embedding ahead of time, [21, H].
    pub token_context: Vec<f32>,
    pub node_context: Linear,
    pub hidden: Linear,
    pub output: Linear,
    pub node_norm: LayerNorm,
    pub feed_forward_norm: LayerNorm,
    pub feed_forward: FeedForward,
}

pub(crate) struct Weights {
    /// Transposed positional embedding weight [66, 16], so a class index selects its row.
    pub position_table: Tensor,
    pub position_bias: Tensor,
    pub edge_embedding: Linear,
    pub edge_norm: LayerNorm,
    pub edge_input: Linear,
    pub encoder: Vec<EncoderLayer>,
    pub decoder: Vec<DecoderLayer>,
    pub output: Linear,
}

/// The checkpoint's tensors, indexed by name, read lazily once their metadata checks out.
struct Checkpoint {
    tensors: PthTensors,
    infos: HashMap<String, TensorInfo>,
    device: Device,
}

impl Checkpoint {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, MpnnError> {
        let info = self
            .infos
            .get(name)
            .ok_or_else(|| MpnnError::MissingTensor(name.to_owned()))?;
        if info.layout.dims() != shape || !matches!(info.dtype, DType::F32) {
            return Err(MpnnError::TensorShape {
                name: name.to_owned(),
                expected: format!("f32 {shape:?}"),
                found: format!("{:?} {:?}", info.dtype, info.layout.dims()),
            });
        }
        let tensor = self
            .tensors
            .get(name)
            .map_err(|source| MpnnError::TensorData {
                name: name.to_owned(),
                source,
            })?
            .ok_or_else(|| MpnnError::MissingTensor(name.to_owned()))?;
        Ok(tensor.to_device(&self.device)?.contiguous()?)
    }

    fn linear(&self, name: &str, inputs: usize, outputs: usize) -> Result<Linear, MpnnError> {
        let weight = self.tensor(&format!("{name}.weight"), &[outputs, inputs])?;
        let bias = self.tensor(&format!("{name}.bias"), &[outputs])?;
        Ok(Linear::new(weight, Some(bias)))
    }

    fn layer_norm(&self, name: &str) -> Result<LayerNorm, MpnnError> {
        let weight = self.tensor(&format!("{name}.weight"), &[HIDDEN])?;
        let bias = self.tensor(&format!("{name}.bias"), &[HIDDEN])?;
        Ok(LayerNorm::new(weight, bias, LAYER_NORM_EPS))
    }

    fn feed_forward(&self, name: &str) -> Result<FeedForward, MpnnError> {
        Ok(FeedForward {
            input: self.linear(&format!("{name}.W_in"), HIDDEN, FEED_FORWARD)?,
            output: self.linear(&format!("{name}.W_out"), FEED_FORWARD, HIDDEN)?,
        })
    }

    fn mlp(&self, prefix: &str, names: [&str; 3], inputs: usize) -> Result<MessageMlp, MpnnError> {
        let first = self.linear(&format!("{prefix}.{}", names[0]), inputs, HIDDEN)?;
        Ok(MessageMlp {
            own: block(&first, 0, HIDDEN, true)?,
            context: block(&first, HIDDEN, inputs - HIDDEN, false)?,
            hidden: self.linear(&format!("{prefix}.{}", names[1]), HIDDEN, HIDDEN)?,
            output: self.linear(&format!("{prefix}.{}", names[2]), HIDDEN, HIDDEN)?,
        })
    }

    fn decoder_layer(
        &self,
        prefix: &str,
        token_embedding: &Tensor,
    ) -> Result<DecoderLayer, MpnnError> {
        let first = self.linear(&format!("{prefix}.W1"), 4 * HIDDEN, HIDDEN)?;
        let token_context = block(&first, 2 * HIDDEN, HIDDEN, false)?
            .forward(token_embedding)?
            .flatten_all()?
            .to_vec1()?;
        Ok(DecoderLayer {
            own: block(&first, 0, HIDDEN, true)?,
            edge_context: block(&first, HIDDEN, HIDDEN, false)?,
            token_context,
            node_context: block(&first, 3 * HIDDEN, HIDDEN, false)?,
            hidden: self.linear(&format!("{prefix}.W2"), HIDDEN, HIDDEN)?,
            output: self.linear(&format!("{prefix}.W3"), HIDDEN, HIDDEN)?,
            node_norm: self.layer_norm(&format!("{prefix}.norm1"))?,
            feed_forward_norm: self.layer_norm(&format!("{prefix}.norm2"))?,
            feed_forward: self.feed_forward(&format!("{prefix}.dense"))?,
        })
    }
}

/// Input columns `start..start + width` of a linear layer, as a layer of their own.
fn block(layer: &Linear, start: usize, width: usize, with_bias: bool) -> Result<Linear, MpnnError> {
    let weight = layer.weight().narrow(1, start, width)?.contiguous()?;
    let bias = if with_bias {
        layer.bias().cloned()
    } else {
        None
    };
    Ok(Linear::new(weight, bias))
}

impl Weights {
    pub(crate) fn load(path: &Path, device: &Device) -> Result<Self, MpnnError> {
        if !path.is_file() {
            return Err(MpnnError::WeightsNotFound(path.to_owned()));
        }
        let unreadable = |source| MpnnError::Checkpoint {
            path: path.to_owned(),
            source,
        };
        let tensors = PthTensors::new(path, Some("model_state_dict")).map_err(unreadable)?;
        let infos = tensors.tensor_infos().clone();
        if infos.is_empty() {
            return Err(MpnnError::MissingTensor("model_state_dict".to_owned()));
        }
        let checkpoint = Checkpoint {
            tensors,
            infos,
            device: device.clone(),
        };

        let position_weight = checkpoint.tensor(
            "features.embeddings.linear.weight",
            &[POSITION_EMBEDDING, POSITION_CLASSES],
        )?;
        let edge_in = POSITION_EMBEDDING + RBF_FEATURES;
        let edge_embedding = Linear::new(
            checkpoint.tensor("features.edge_embedding.weight", &[HIDDEN, edge_in])?,
            None,
        );
        let token_embedding = checkpoint.tensor("W_s.weight", &[ALPHABET_SIZE, HIDDEN])?;
        let encoder = (0..LAYERS)
            .map(|layer| {
                let prefix = format!("encoder_layers.{layer}");
                Ok(EncoderLayer {
                    node_message: checkpoint.mlp(&prefix, ["W1", "W2", "W3"], 3 * HIDDEN)?,
                    edge_message: checkpoint.mlp(&prefix, ["W11", "W12", "W13"], 3 * HIDDEN)?,
                    node_norm: checkpoint.layer_norm(&format!("{prefix}.norm1"))?,
                    feed_forward_norm: checkpoint.layer_norm(&format!("{prefix}.norm2"))?,
                    edge_norm: checkpoint.layer_norm(&format!("{prefix}.norm3"))?,
                    feed_forward: checkpoint.feed_forward(&format!("{prefix}.dense"))?,
                })
            })
            .collect::<Result<Vec<_>, MpnnError>>()?;
        let decoder = (0..LAYERS)
            .map(|layer| {
                checkpoint.decoder_layer(&format!("decoder_layers.{layer}"), &token_embedding)
            })
            .collect::<Result<Vec<_>, MpnnError>>()?;

        Ok(Self {
            position_table: position_weight.t()?.contiguous()?,
            position_bias: checkpoint
                .tensor("features.embeddings.linear.bias", &[POSITION_EMBEDDING])?,
            edge_embedding,
            edge_norm: checkpoint.layer_norm("features.norm_edges")?,
            edge_input: checkpoint.linear("W_e", HIDDEN, HIDDEN)?,
            encoder,
            decoder,
            output: checkpoint.linear("W_out", HIDDEN, ALPHABET_SIZE)?,
        })
    }
}
