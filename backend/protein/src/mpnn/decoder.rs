//! The autoregressive decoder. Each position attends to its neighbours: those decoded before it
//! through their token and their decoder state, the others through their encoder state only.
//!
//! A position's decoder states depend only on the positions decoded before it, whose states never
//! change afterwards. So any set of positions whose tokens are known can be computed together,
//! layer by layer, reading earlier positions' states from a cache: all of them when scoring a
//! sequence (the reference's `forward`), and the fixed positions that open every design's order.
//! The designed positions then go one step at a time, each step running the decoder for just the
//! position being decoded in every design of the batch and caching its states for the positions
//! after it, as the reference's `sample` does.
//!
//! Both paths apply the first message layer's edge, token and node blocks once per edge, token
//! and node state rather than once per edge and step, which takes the largest matrix product out
//! of the per-step work.

use candle_core::{Device, Module, Tensor};
use rand::Rng;
use rand::rngs::StdRng;

use super::layers::Encoded;
use super::weights::{DecoderLayer, Weights};
use super::{ALPHABET_SIZE, HIDDEN, MpnnError, STANDARD_RESIDUES};

/// How a track picks the tokens of the positions it designs.
pub(crate) struct Sampling {
    pub rng: StdRng,
    pub temperature: f32,
}

/// One design being sampled: its decoding order, its tokens (given ones in, sampled ones out) and
/// the log-probabilities the model gave each position when it was decoded.
pub(crate) struct Track {
    pub order: Vec<usize>,
    pub tokens: Vec<u32>,
    /// Positions whose token is sampled; the others keep their given token.
    pub sampled: Vec<bool>,
    pub sampling: Sampling,
    pub log_probs: Vec<[f32; ALPHABET_SIZE]>,
}

impl Track {
    pub fn new(
        order: Vec<usize>,
        tokens: Vec<u32>,
        sampled: Vec<bool>,
        sampling: Sampling,
    ) -> Self {
        let len = tokens.len();
        Self {
            order,
            tokens,
            sampled,
            sampling,
            log_probs: vec![[0.0; ALPHABET_SIZE]; len],
        }
    }
}

fn log_softmax(logits: &[f32]) -> [f32; ALPHABET_SIZE] {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_sum = logits.iter().map(|&x| (x - max).exp()).sum::<f32>().ln() + max;
    std::array::from_fn(|letter| logits.get(letter).map_or(f32::NAN, |&x| x - log_sum))
}

/// Draws one of the 20 standard residues from softmax(logits / temperature); 'X' is never drawn.
fn sample_token(logits: &[f32], sampling: &mut Sampling) -> u32 {
    let standard = &logits[..STANDARD_RESIDUES.min(logits.len())];
    let max = standard.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let temperature = f64::from(sampling.temperature);
    let weights: Vec<f64> = standard
        .iter()
        .map(|&x| (f64::from(x - max) / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let best = || {
        (0..standard.len())
            .max_by(|&a, &b| standard[a].total_cmp(&standard[b]))
            .unwrap_or(0) as u32
    };
    // Only NaN logits (a degenerate structure) leave nothing to sample from: fall back to the
    // most likely residue rather than fail half-way through a batch.
    if !(total.is_finite() && total > 0.0) {
        return best();
    }
    let mut remaining = sampling.rng.random::<f64>() * total;
    for (letter, &weight) in weights.iter().enumerate() {
        if remaining < weight {
            return letter as u32;
        }
        remaining -= weight;
    }
    best()
}

/// A decoder layer's first message layer applied ahead of time to the encoder's output.
struct Projected {
    /// Edge block applied to each edge state, [L·K, H].
    edges: Vec<f32>,
    /// Node block applied to each encoder node state, [L, H].
    nodes: Vec<f32>,
}

fn project(layer: &DecoderLayer, encoded: &Encoded) -> Result<Projected, MpnnError> {
    Ok(Projected {
        edges: layer
            .edge_context
            .forward(&encoded.edges)?
            .flatten_all()?
            .to_vec1()?,
        nodes: layer
            .node_context
            .forward(&encoded.nodes)?
            .flatten_all()?
            .to_vec1()?,
    })
}

fn add_row(target: &mut [f32], source: &[f32], row: usize) {
    for (sum, value) in target
        .iter_mut()
        .zip(&source[row * HIDDEN..(row + 1) * HIDDEN])
    {
        *sum += value;
    }
}

fn ranks(order: &[usize]) -> Vec<usize> {
    let mut rank = vec![0; order.len()];
    for (step, &position) in order.iter().enumerate() {
        rank[position] = step;
    }
    rank
}

/// One position of one track, decoded at `step` of that track's order.
struct Row {
    track: usize,
    position: usize,
    step: usize,
}

/// What decoding a set of tracks shares: the projections and every decoded position's states.
struct Decoding<'a> {
    weights: &'a Weights,
    encoded: &'a Encoded,
    projected: Vec<Projected>,
    /// Per track, the step at which each position is decoded.
    ranks: Vec<Vec<usize>>,
    /// Per layer after the first, per track and decoded position: its state entering that layer,
    /// already through the layer's node block, which is all that later positions read from it.
    decoded_states: Vec<Vec<f32>>,
    device: &'a Device,
}

impl<'a> Decoding<'a> {
    fn new(
        weights: &'a Weights,
        encoded: &'a Encoded,
        orders: &[&[usize]],
        device: &'a Device,
    ) -> Result<Self, MpnnError> {
        let projected = weights
            .decoder
            .iter()
            .map(|layer| project(layer, encoded))
            .collect::<Result<_, _>>()?;
        let cached_layers = weights.decoder.len().saturating_sub(1);
        Ok(Self {
            weights,
            encoded,
            projected,
            ranks: orders.iter().map(|order| ranks(order)).collect(),
            decoded_states: vec![vec![0f32; orders.len() * encoded.len * HIDDEN]; cached_layers],
            device,
        })
    }

    /// Runs the decoder for `rows`, whose tokens at earlier steps are `tokens[track]`, and returns
    /// their logits. Every position a row reads as decoded before it must be in an earlier call
    /// or in `rows` itself.
    fn run(&mut self, rows: &[Row], tokens: &[&[u32]]) -> Result<Vec<Vec<f32>>, MpnnError> {
        let (len, k) = (self.encoded.len, self.encoded.neighbours);
        let positions: Vec<u32> = rows.iter().map(|row| row.position as u32).collect();
        let mut states = self
            .encoded
            .nodes
            .index_select(&Tensor::from_slice(&positions, rows.len(), self.device)?, 0)?;
        let mut first = vec![0f32; rows.len() * k * HIDDEN];
        for (layer_number, layer) in self.weights.decoder.iter().enumerate() {
            let projected = &self.projected[layer_number];
            for (row, context) in rows.iter().zip(first.chunks_exact_mut(k * HIDDEN)) {
                for (slot, context) in context.chunks_exact_mut(HIDDEN).enumerate() {
                    let edge = row.position * k + slot;
                    let neighbour = self.encoded.neighbour_index[edge] as usize;
                    let before = self.ranks[row.track][neighbour] < row.step;
                    context.copy_from_slice(&projected.edges[edge * HIDDEN..(edge + 1) * HIDDEN]);
                    if before {
                        add_row(
                            context,
                            &layer.token_context,
                            tokens[row.track][neighbour] as usize,
                        );
                    }
                    // Neighbours decoded earlier contribute their state at this layer's input;
                    // the others (and the position itself) their encoder state.
                    match layer_number.checked_sub(1) {
                        Some(cache) if before => add_row(
                            context,
                            &self.decoded_states[cache],
                            row.track * len + neighbour,
                        ),
                        _ => add_row(context, &projected.nodes, neighbour),
                    }
                }
            }
            states = layer.forward(
                &states,
                &Tensor::from_slice(&first, (rows.len(), k, HIDDEN), self.device)?,
            )?;
            if let Some(next) = self.weights.decoder.get(layer_number + 1) {
                let values = next
                    .node_context
                    .forward(&states)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                for (row, value) in rows.iter().zip(values.chunks_exact(HIDDEN)) {
                    let offset = (row.track * len + row.position) * HIDDEN;
                    self.decoded_states[layer_number][offset..offset + HIDDEN]
                        .copy_from_slice(value);
                }
            }
        }
        Ok(self.weights.output.forward(&states)?.to_vec2::<f32>()?)
    }

    /// Decodes `rows` with each track's tokens so far: records the log-probabilities each row's
    /// position is decoded with, and samples its token where the position is sampled.
    fn step(&mut self, rows: &[Row], tracks: &mut [Track]) -> Result<(), MpnnError> {
        if rows.is_empty() {
            return Ok(());
        }
        let tokens: Vec<&[u32]> = tracks.iter().map(|track| track.tokens.as_slice()).collect();
        let logits = self.run(rows, &tokens)?;
        for (row, logits) in rows.iter().zip(&logits) {
            let track = &mut tracks[row.track];
            track.log_probs[row.position] = log_softmax(logits);
            if track.sampled[row.position] {
                track.tokens[row.position] = sample_token(logits, &mut track.sampling);
            }
        }
        Ok(())
    }
}

/// Log-probabilities of every position with all tokens given, decoded in `order`.
pub(crate) fn teacher_forced(
    weights: &Weights,
    encoded: &Encoded,
    order: &[usize],
    tokens: &[u32],
    device: &Device,
) -> Result<Vec<[f32; ALPHABET_SIZE]>, MpnnError> {
    let mut decoding = Decoding::new(weights, encoded, &[order], device)?;
    let rows: Vec<Row> = order
        .iter()
        .enumerate()
        .map(|(step, &position)| Row {
            track: 0,
            position,
            step,
        })
        .collect();
    let logits = decoding.run(&rows, &[tokens])?;
    let mut log_probs = vec![[0.0; ALPHABET_SIZE]; order.len()];
    for (row, logits) in rows.iter().zip(&logits) {
        log_probs[row.position] = log_softmax(logits);
    }
    Ok(log_probs)
}

/// Decodes every track, sampling the tokens of its sampled positions and recording the
/// log-probabilities each position was decoded with.
pub(crate) fn decode(
    weights: &Weights,
    encoded: &Encoded,
    tracks: &mut [Track],
    device: &Device,
) -> Result<(), MpnnError> {
    let orders: Vec<&[usize]> = tracks.iter().map(|track| track.order.as_slice()).collect();
    let mut decoding = Decoding::new(weights, encoded, &orders, device)?;
    // The given positions that open each order need no sampling: decode them all at once, one
    // track at a time to bound the working memory.
    let opening: Vec<usize> = tracks
        .iter()
        .map(|track| {
            track
                .order
                .iter()
                .take_while(|&&position| !track.sampled[position])
                .count()
        })
        .collect();
    for (index, &given) in opening.iter().enumerate() {
        let rows: Vec<Row> = tracks[index].order[..given]
            .iter()
            .enumerate()
            .map(|(step, &position)| Row {
                track: index,
                position,
                step,
            })
            .collect();
        decoding.step(&rows, tracks)?;
    }
    let start = opening.iter().copied().min().unwrap_or(0);
    for step in start..encoded.len {
        let rows: Vec<Row> = tracks
            .iter()
            .enumerate()
            .filter(|&(index, _)| step >= opening[index])
            .map(|(track, t)| Row {
                track,
                position: t.order[step],
                step,
            })
            .collect();
        decoding.step(&rows, tracks)?;
    }
    Ok(())
}
