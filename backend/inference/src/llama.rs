//! A quantized llama forward pass of our own, with the KV cache outside the weights.
//!
//! candle-transformers' `quantized_llama` keeps its cache inside the model and fails on batched
//! prompts (it hands a strided view to the quantized output matmul), so the `n` answers of one
//! prompt could not be decoded together. Here the prompt is read once, its cache is repeated
//! across the `n` rows, and decoding runs as one batch; every position's logits are available, so
//! prompt logprobs cost one pass. Weights are shared (`Arc`) between clones.

use std::collections::HashMap;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{D, DType, Device, IndexOp, Module, Result, Tensor};
use candle_transformers::utils::{build_causal_mask, repeat_kv};

/// Quantization types candle has no SIMD kernel for on x86: re-quantized to Q8_0 at load, which
/// keeps every value (8 bits hold what 4 or 5 did) and uses the AVX2 dot product.
const SLOW_ON_CPU: [GgmlDType; 4] = [
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_1,
];

/// How a model's matrices are held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// As the file holds them: a GGUF's own quantization, a safetensors checkpoint's dense f32.
    Stored,
    /// Quantized for speed: a GGUF's types without a fast CPU kernel re-quantized to Q8_0, a
    /// safetensors checkpoint quantized to Q8_0. What the engine serves by default.
    #[default]
    Quantized,
    /// Dense f32 (SmolLM2-135M: about 540 MB, four times Q8_0): nothing quantizes activations,
    /// so two ways of computing the same logits (a prompt read in chunks or in one pass, scored
    /// or decoded) agree to f32 rounding on any CPU.
    F32,
}

/// A LoRA adapter's update to one matrix, `x · Aᵀ · (scale · B)ᵀ`, kept in f32 beside the base:
/// one copy of the base serves every adapter, and a merged matrix is never re-quantized with a
/// large update's outliers widening its quantization steps.
#[derive(Debug, Clone)]
pub struct LowRank {
    /// in × rank (PEFT's `lora_A`, transposed).
    down: Tensor,
    /// rank × out (PEFT's `lora_B` times the adapter's scale, transposed).
    up: Tensor,
}

impl LowRank {
    /// PEFT's layout: `a` is rank × in, `b` is out × rank; the update is `scale · B·A`.
    pub fn new(a: &Tensor, b: &Tensor, scale: f64) -> Result<Self> {
        let (rank, _) = a.dims2()?;
        let (_, b_rank) = b.dims2()?;
        if rank != b_rank {
            candle_core::bail!("LoRA A has rank {rank}, B {b_rank}");
        }
        Ok(Self {
            down: a.to_dtype(DType::F32)?.t()?.contiguous()?,
            up: (b.to_dtype(DType::F32)? * scale)?.t()?.contiguous()?,
        })
    }

    /// (in, out) of the matrix this update applies to.
    fn dims(&self) -> Result<(usize, usize)> {
        Ok((self.down.dim(0)?, self.up.dim(1)?))
    }
}

/// One weight matrix as served: the (usually quantized) base, plus an adapter's update if any.
#[derive(Debug, Clone)]
pub(crate) struct Projection {
    base: QMatMul,
    adapter: Option<LowRank>,
}

impl Projection {
    pub fn new(base: QMatMul) -> Self {
        Self {
            base,
            adapter: None,
        }
    }

    /// Applies `low_rank` beside the base (replacing any earlier adapter).
    fn attach(&mut self, low_rank: LowRank) -> Result<()> {
        let (out, input) = match &self.base {
            QMatMul::QTensor(q) => q.shape().dims2()?,
            QMatMul::Tensor(t) | QMatMul::TensorF16(t) => t.dims2()?,
        };
        if low_rank.dims()? != (input, out) {
            candle_core::bail!(
                "a LoRA update of {:?} (in, out) does not fit a {out} × {input} matrix",
                low_rank.dims()?
            );
        }
        self.adapter = Some(low_rank);
        Ok(())
    }
}

impl Module for Projection {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.base.forward(x)?;
        match &self.adapter {
            None => Ok(y),
            Some(low_rank) => {
                y + x
                    .broadcast_matmul(&low_rank.down)?
                    .broadcast_matmul(&low_rank.up)?
            }
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub attn_norm: Tensor,
    pub wq: Projection,
    pub wk: Projection,
    pub wv: Projection,
    pub wo: Projection,
    pub ffn_norm: Tensor,
    pub gate: Projection,
    pub up: Projection,
    pub down: Projection,
}

impl Layer {
    /// The matrix Hugging Face names `model.layers.{i}.{module}.{projection}.weight`.
    fn projection_mut(&mut self, module: &str, projection: &str) -> Option<&mut Projection> {
        Some(match (module, projection) {
            ("self_attn", "q_proj") => &mut self.wq,
            ("self_attn", "k_proj") => &mut self.wk,
            ("self_attn", "v_proj") => &mut self.wv,
            ("self_attn", "o_proj") => &mut self.wo,
            ("mlp", "gate_proj") => &mut self.gate,
            ("mlp", "up_proj") => &mut self.up,
            ("mlp", "down_proj") => &mut self.down,
            _ => return None,
        })
    }
}

/// The numbers that shape a llama, whatever file it came from.
pub(crate) struct Shape {
    pub n_head: usize,
    pub n_kv_head: usize,
    pub hidden: usize,
    pub eps: f32,
    pub rope_base: f32,
    pub context: usize,
    /// GGUF's permuted q/k weights pair dimensions (2i, 2i+1); Hugging Face's pair (i, i + d/2).
    pub rope_interleaved: bool,
}

#[derive(Debug, Clone)]
pub struct Llama {
    embeddings: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QMatMul,
    cos: Tensor,
    sin: Tensor,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    eps: f32,
    rope_interleaved: bool,
    pub context_length: usize,
}

/// Keys and values of every layer for the rows of one batch.
#[derive(Debug, Clone, Default)]
pub struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
}

impl KvCache {
    /// The same cache for `n` rows (from a one-row prompt pass).
    pub fn repeat_rows(&self, n: usize) -> Result<Self> {
        let layers = self
            .layers
            .iter()
            .map(|entry| {
                entry
                    .as_ref()
                    .map(|(k, v)| Ok((k.repeat((n, 1, 1, 1))?, v.repeat((n, 1, 1, 1))?)))
                    .transpose()
            })
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }
}

impl Llama {
    pub fn from_gguf<R: std::io::Read + std::io::Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
        context_cap: usize,
        precision: Precision,
    ) -> Result<Self> {
        let device = &Device::Cpu;
        let md = |key: &str| {
            content
                .metadata
                .get(key)
                .ok_or_else(|| candle_core::Error::Msg(format!("GGUF metadata lacks {key}")))
        };
        let n_head = md("llama.attention.head_count")?.to_u32()? as usize;
        let n_kv_head = md("llama.attention.head_count_kv")?.to_u32()? as usize;
        let n_layers = md("llama.block_count")?.to_u32()? as usize;
        let shape = Shape {
            n_head,
            n_kv_head,
            hidden: md("llama.embedding_length")?.to_u32()? as usize,
            eps: md("llama.attention.layer_norm_rms_epsilon")?.to_f32()?,
            rope_base: md("llama.rope.freq_base")
                .and_then(|v| v.to_f32())
                .unwrap_or(10_000.0),
            context: md("llama.context_length")
                .and_then(|v| v.to_u32())
                .map_or(context_cap, |c| (c as usize).min(context_cap)),
            rope_interleaved: true,
        };
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let matmul = |t: QTensor| -> Result<QMatMul> {
            match precision {
                Precision::F32 => Ok(QMatMul::Tensor(t.dequantize(device)?)),
                Precision::Quantized if SLOW_ON_CPU.contains(&t.dtype()) => {
                    let dense = t.dequantize(device)?;
                    QMatMul::from_qtensor(QTensor::quantize(&dense, GgmlDType::Q8_0)?)
                }
                _ => QMatMul::from_qtensor(t),
            }
        };
        let embeddings_q = tensor("token_embd.weight")?;
        let embeddings = embeddings_q.dequantize(device)?;
        let norm = tensor("output_norm.weight")?.dequantize(device)?;
        // Models with tied embeddings (SmolLM2) have no separate output matrix.
        let output = match tensor("output.weight") {
            Ok(t) => matmul(t)?,
            Err(_) => matmul(embeddings_q)?,
        };
        let mut layers = Vec::with_capacity(n_layers);
        for i in 0..n_layers {
            let mut get = |suffix: &str| tensor(&format!("blk.{i}.{suffix}.weight"));
            let mut projection =
                |suffix: &str| -> Result<Projection> { Ok(Projection::new(matmul(get(suffix)?)?)) };
            layers.push(Layer {
                wq: projection("attn_q")?,
                wk: projection("attn_k")?,
                wv: projection("attn_v")?,
                wo: projection("attn_output")?,
                gate: projection("ffn_gate")?,
                up: projection("ffn_up")?,
                down: projection("ffn_down")?,
                attn_norm: get("attn_norm")?.dequantize(device)?,
                ffn_norm: get("ffn_norm")?.dequantize(device)?,
            });
        }
        Self::assemble(embeddings, layers, norm, output, shape)
    }

    /// Checks the attention shape and precomputes the rotary tables.
    pub(crate) fn assemble(
        embeddings: Tensor,
        layers: Vec<Layer>,
        norm: Tensor,
        output: QMatMul,
        shape: Shape,
    ) -> Result<Self> {
        let Shape {
            n_head,
            n_kv_head,
            hidden,
            eps,
            rope_base,
            context,
            rope_interleaved,
        } = shape;
        let head_dim = hidden.checked_div(n_head).unwrap_or(0);
        if n_head == 0
            || n_kv_head == 0
            || !n_head.is_multiple_of(n_kv_head)
            || head_dim * n_head != hidden
            || !head_dim.is_multiple_of(2)
        {
            candle_core::bail!(
                "inconsistent attention shape: hidden {hidden}, {n_head} heads, {n_kv_head} kv heads"
            );
        }
        let device = &Device::Cpu;
        let inv_freq: Vec<f32> = (0..head_dim)
            .step_by(2)
            .map(|i| 1.0 / rope_base.powf(i as f32 / head_dim as f32))
            .collect();
        let inv_freq = Tensor::new(inv_freq.as_slice(), device)?;
        let positions = Tensor::arange(0, context as u32, device)?
            .to_dtype(DType::F32)?
            .reshape((context, 1))?;
        let angles = positions.matmul(&inv_freq.reshape((1, head_dim / 2))?)?;
        Ok(Self {
            embeddings,
            layers,
            norm,
            output,
            cos: angles.cos()?,
            sin: angles.sin()?,
            n_head,
            n_kv_head,
            head_dim,
            eps,
            rope_interleaved,
            context_length: context,
        })
    }

    /// This model with LoRA updates applied beside its matrices, named as Hugging Face names the
    /// matrix (`model.layers.0.self_attn.q_proj.weight`). The weights are shared, not copied, so
    /// any number of adapters cost one base. Only the Hugging Face layout is accepted: a GGUF
    /// file's q and k rows are permuted, and an adapter trained on the unpermuted rows would not
    /// fit them.
    pub fn with_adapters(&self, adapters: HashMap<String, LowRank>) -> Result<Self> {
        if self.rope_interleaved && !adapters.is_empty() {
            candle_core::bail!(
                "adapters apply to a model in Hugging Face's layout, not a GGUF one"
            );
        }
        let mut model = self.clone();
        for (name, low_rank) in adapters {
            let unknown = || candle_core::Error::Msg(format!("the model has no matrix {name}"));
            let rest = name.strip_prefix("model.layers.").ok_or_else(unknown)?;
            let mut parts = rest.split('.');
            let (Some(index), Some(module), Some(projection), Some("weight"), None) = (
                parts.next().and_then(|i| i.parse::<usize>().ok()),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) else {
                return Err(unknown());
            };
            let target = model
                .layers
                .get_mut(index)
                .and_then(|layer| layer.projection_mut(module, projection))
                .ok_or_else(unknown)?;
            target.attach(low_rank)?;
        }
        Ok(model)
    }

    /// Transformer blocks in the model.
    pub fn layer_count(&self) -> usize {
        self.layers.len()
    }

    /// Rows of the embedding table: the largest token id plus one the model can read.
    pub fn vocab_size(&self) -> usize {
        self.embeddings.dim(0).unwrap_or(0)
    }

    /// Bytes one token adds to a [`KvCache`] row: a key and a value vector per layer and KV head,
    /// in f32 (the dtype the attention computes them in).
    pub fn kv_bytes_per_token(&self) -> usize {
        self.layers.len() * 2 * self.n_kv_head * self.head_dim * std::mem::size_of::<f32>()
    }

    pub fn new_cache(&self) -> KvCache {
        KvCache {
            layers: vec![None; self.layers.len()],
        }
    }

    /// Logits for `tokens` (batch × sequence) placed after `position` cached tokens: of the last
    /// position only (batch × vocab), or of every position (batch × sequence × vocab).
    pub fn forward(
        &self,
        tokens: &Tensor,
        position: usize,
        cache: &mut KvCache,
        every_position: bool,
    ) -> Result<Tensor> {
        let (_, seq_len) = tokens.dims2()?;
        let mask = if seq_len > 1 {
            Some(build_causal_mask(seq_len, position, tokens.device())?)
        } else {
            None
        };
        let mut x = self
            .embeddings
            .embedding(&tokens.flatten_all()?)?
            .reshape((tokens.dim(0)?, seq_len, self.embeddings.dim(1)?))?;
        for (layer, slot) in self.layers.iter().zip(cache.layers.iter_mut()) {
            let normed = candle_nn::ops::rms_norm(&x, &layer.attn_norm, self.eps)?;
            let attended = self.attention(layer, &normed, mask.as_ref(), position, slot)?;
            x = (x + attended)?;
            let normed = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps)?;
            let hidden = (candle_nn::ops::silu(&layer.gate.forward(&normed)?)?
                * layer.up.forward(&normed)?)?;
            x = (x + layer.down.forward(&hidden)?)?;
        }
        let x = candle_nn::ops::rms_norm(&x, &self.norm, self.eps)?;
        if every_position {
            self.output.forward(&x.contiguous()?)
        } else {
            self.output
                .forward(&x.i((.., seq_len - 1, ..))?.contiguous()?)
        }
    }

    fn attention(
        &self,
        layer: &Layer,
        x: &Tensor,
        mask: Option<&Tensor>,
        position: usize,
        slot: &mut Option<(Tensor, Tensor)>,
    ) -> Result<Tensor> {
        let (batch, seq_len, hidden) = x.dims3()?;
        let heads = |t: Tensor, n: usize| -> Result<Tensor> {
            t.reshape((batch, seq_len, n, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = heads(layer.wq.forward(x)?, self.n_head)?;
        let k = heads(layer.wk.forward(x)?, self.n_kv_head)?;
        let v = heads(layer.wv.forward(x)?, self.n_kv_head)?;
        let cos = self.cos.narrow(0, position, seq_len)?;
        let sin = self.sin.narrow(0, position, seq_len)?;
        let (q, k) = if self.rope_interleaved {
            (
                candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?,
                candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?,
            )
        } else {
            (
                candle_nn::rotary_emb::rope(&q, &cos, &sin)?,
                candle_nn::rotary_emb::rope(&k, &cos, &sin)?,
            )
        };
        let (k, v) = match slot.take() {
            Some((k_cache, v_cache)) if position > 0 => (
                Tensor::cat(&[&k_cache, &k], 2)?,
                Tensor::cat(&[&v_cache, &v], 2)?,
            ),
            _ => (k, v),
        };
        *slot = Some((k.clone(), v.clone()));
        let group = self.n_head / self.n_kv_head;
        let k = repeat_kv(k, group)?;
        let v = repeat_kv(v, group)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let scores = match mask {
            Some(mask) => {
                let blocked = mask.broadcast_as(scores.shape())?;
                let neg_inf =
                    Tensor::new(f32::NEG_INFINITY, x.device())?.broadcast_as(scores.shape())?;
                blocked.where_cond(&neg_inf, &scores)?
            }
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let y = weights.matmul(&v.contiguous()?)?;
        let y = y.transpose(1, 2)?.reshape((batch, seq_len, hidden))?;
        layer.wo.forward(&y)
    }
}

/// Logits rows as plain vectors: `[batch, vocab]` or the last dimension of any shape.
pub fn rows(logits: &Tensor) -> Result<Vec<Vec<f32>>> {
    let vocab = logits.dim(D::Minus1)?;
    logits.to_dtype(DType::F32)?.reshape(((), vocab))?.to_vec2()
}
