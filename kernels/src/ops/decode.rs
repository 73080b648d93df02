//! A decode step of a tiny language model, built from this module's kernels: embed the current
//! token, layer-normalise, a two-layer MLP (`tanh`, then back to the model width plus the
//! residual), project to the vocabulary, softmax, and pick the most likely token, which becomes
//! the next step's input and is appended to a history on the device. A step's seven launches
//! read and write only buffers the model owns, so a captured step replays as a decode loop.
//!
//! Weights are drawn from a seed by [`splitmix64`] (`scripts/gpu/torch_decode.py` draws the same
//! ones for the PyTorch baseline).

use lockstep::kernel::Scalar;
use lockstep::{ComputeClient, Device, Handle, Kernel};

use super::check::{create, launch};
use super::check_within;
use super::layer_norm::{EPS, layer_norm, layer_norm_bounds};
use super::matvec::{Epilogue, argmax, argmax_host, embedding, matvec, matvec_bounds};
use super::softmax::{softmax, softmax_bounds};

/// The model's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// The width of a token's embedding and of the residual stream.
    pub model: usize,
    /// The width of the MLP's hidden layer.
    pub hidden: usize,
    /// How many tokens there are.
    pub vocab: usize,
}

impl Dims {
    /// What the examples and the property run: quick on the simulator.
    pub const SMALL: Dims = Dims {
        model: 64,
        hidden: 128,
        vocab: 96,
    };
    /// What the benchmark runs (and `torch_decode.py`'s default).
    pub const BENCH: Dims = Dims {
        model: 512,
        hidden: 2048,
        vocab: 4096,
    };
}

/// SplitMix64's output function of `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `i`-th value of `stream` in `[0, 1)`: the top 24 bits of `splitmix64(stream·2³² + i)`,
/// exact in `f32`.
pub fn unit(stream: u64, i: u64) -> f32 {
    let bits = splitmix64(stream.wrapping_mul(1 << 32).wrapping_add(i)) >> 40;
    bits as f32 / (1u32 << 24) as f32
}

/// The model's parameters, row-major: `embed` (vocab × model), `w1` (hidden × model), `w2`
/// (model × hidden), `w_out` (vocab × model).
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// The sizes every other field follows.
    pub dims: Dims,
    /// Token embeddings, vocab × model.
    pub embed: Vec<f32>,
    /// The layer norm's scale, model long.
    pub gamma: Vec<f32>,
    /// The layer norm's shift, model long.
    pub beta: Vec<f32>,
    /// The MLP's first layer, hidden × model.
    pub w1: Vec<f32>,
    /// The first layer's bias, hidden long.
    pub b1: Vec<f32>,
    /// The MLP's second layer, model × hidden.
    pub w2: Vec<f32>,
    /// The second layer's bias, model long.
    pub b2: Vec<f32>,
    /// The projection to the vocabulary, vocab × model.
    pub w_out: Vec<f32>,
    /// The projection's bias, vocab long.
    pub b_out: Vec<f32>,
}

impl Weights {
    /// Tensor `t` (in field order, from 0) of `seed` is stream `16·seed + t`: each value is
    /// `(2·unit - 1)·scale` (exact: the scales are powers of two, [`fan_in`] for a matrix), and
    /// `gamma` is `1 + that` rounded.
    pub fn generate(dims: Dims, seed: u64) -> Self {
        let draw = |t: u64, len: usize, scale: f32| -> Vec<f32> {
            (0..len as u64)
                .map(|i| (2.0 * unit(seed.wrapping_mul(16).wrapping_add(t), i) - 1.0) * scale)
                .collect()
        };
        let Dims {
            model,
            hidden,
            vocab,
        } = dims;
        Weights {
            dims,
            embed: draw(0, vocab * model, 1.0),
            gamma: draw(1, model, 0.125).into_iter().map(|g| 1.0 + g).collect(),
            beta: draw(2, model, 0.125),
            w1: draw(3, hidden * model, fan_in(model)),
            b1: draw(4, hidden, 0.125),
            w2: draw(5, model * hidden, fan_in(hidden)),
            b2: draw(6, model, 0.125),
            w_out: draw(7, vocab * model, fan_in(model)),
            b_out: draw(8, vocab, 0.125),
        }
    }
}

/// The scale of a matrix with `n` columns: `2^-⌈⌈log₂ n⌉ / 2⌉`, about `1/√n`.
pub fn fan_in(n: usize) -> f32 {
    let log2 = usize::BITS - n.saturating_sub(1).leading_zeros();
    1.0 / (1u64 << log2.div_ceil(2)) as f32
}

/// What one step left on the device, read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Stages {
    /// The current token's embedding.
    pub x: Vec<f32>,
    /// `x` layer-normalised.
    pub ln: Vec<f32>,
    /// The MLP's hidden activations, `tanh(w1 · ln + b1)`.
    pub h: Vec<f32>,
    /// The MLP's output plus the residual, `w2 · h + b2 + x`.
    pub y: Vec<f32>,
    /// `w_out · y + b_out`.
    pub logits: Vec<f32>,
    /// The softmax of `logits`.
    pub probs: Vec<f32>,
    /// The most likely token: the next step's input.
    pub token: u32,
}

/// Checks one step that took `token_in` from what each stage read on the device: the
/// embedding bit for bit, each later stage within its bound from the device's previous stage,
/// and the chosen token exactly the argmax of the device's probabilities.
pub fn check_step(w: &Weights, token_in: u32, s: &Stages) -> Result<(), String> {
    let d = w.dims.model;
    let row = &w.embed[token_in as usize * d..(token_in as usize + 1) * d];
    if s.x
        .iter()
        .map(|x| x.to_bits())
        .ne(row.iter().map(|x| x.to_bits()))
    {
        return Err(format!(
            "embedding of token {token_in} differs from its row"
        ));
    }
    check_within(
        "layer norm",
        &s.ln,
        &layer_norm_bounds(&s.x, &w.gamma, &w.beta, EPS),
    )?;
    let mlp_in = matvec_bounds(Epilogue::Tanh, &w.w1, &s.ln, &w.b1, &[]);
    check_within("mlp hidden", &s.h, &mlp_in)?;
    let mlp_out = matvec_bounds(Epilogue::Residual, &w.w2, &s.h, &w.b2, &s.x);
    check_within("mlp out", &s.y, &mlp_out)?;
    let logits = matvec_bounds(Epilogue::Bias, &w.w_out, &s.y, &w.b_out, &[]);
    check_within("logits", &s.logits, &logits)?;
    check_within("softmax", &s.probs, &softmax_bounds(&s.logits))?;
    let want = argmax_host(&s.probs);
    if s.token != want {
        return Err(format!(
            "argmax chose {}, the probabilities' first maximum is {want}",
            s.token
        ));
    }
    Ok(())
}

/// The model on a device: weights, activations and the kernels of a step.
pub struct DecodeModel {
    dims: Dims,
    weights: [Handle; 9],
    /// `x`, `ln`, `h`, `y`, `logits`, `probs`.
    act: [Handle; 6],
    /// The current token (one `u32`), the history, and its length (one `u32`).
    token: Handle,
    history: Handle,
    count: Handle,
    kernels: [Kernel; 7],
}

impl DecodeModel {
    /// Uploads `w` and zeroed activations, the current token `first` and an empty history of
    /// `history_len` tokens. Call it between `graph_prepare` and a capture to let a graph own
    /// the buffers.
    pub fn upload<D: Device>(
        c: &ComputeClient<D>,
        w: &Weights,
        first: u32,
        history_len: usize,
    ) -> Result<Self, String> {
        let create_u32 = |v: &[u32]| create(c, v);
        let create = |v: &[f32]| create(c, v);
        let Dims {
            model,
            hidden,
            vocab,
        } = w.dims;
        let weights = [
            &w.embed, &w.gamma, &w.beta, &w.w1, &w.b1, &w.w2, &w.b2, &w.w_out, &w.b_out,
        ]
        .map(|v| create(v));
        let act = [model, model, hidden, model, vocab, vocab].map(|n| create(&vec![0.0; n]));
        Ok(DecodeModel {
            dims: w.dims,
            weights: collect(weights)?,
            act: collect(act)?,
            token: create_u32(&[first])?,
            history: create_u32(&vec![0; history_len.max(1)])?,
            count: create_u32(&[0])?,
            kernels: [
                embedding(),
                layer_norm(),
                matvec(Epilogue::Tanh),
                matvec(Epilogue::Residual),
                matvec(Epilogue::Bias),
                softmax(),
                argmax(),
            ],
        })
    }

    /// Enqueues one step's seven launches on the client's stream.
    pub fn launch_step<D: Device>(&self, c: &ComputeClient<D>) -> Result<(), String> {
        let [embed, gamma, beta, w1, b1, w2, b2, w_out, b_out] = &self.weights;
        let [x, ln, h, y, logits, probs] = &self.act;
        let Dims {
            model,
            hidden,
            vocab,
        } = self.dims;
        let one_row = |cols: usize| [Scalar::U32(cols as u32)];
        let norm = [
            Scalar::U32(model as u32),
            Scalar::F32(1.0 / model as f32),
            Scalar::F32(EPS),
        ];
        let steps: [(&[&Handle], &[Scalar], usize); 7] = [
            (&[embed, &self.token, x], &[], model.div_ceil(128)),
            (&[x, gamma, beta, ln], &norm, 1),
            (&[w1, ln, b1, h], &[], hidden),
            (&[w2, h, b2, x, y], &[], model),
            (&[w_out, y, b_out, logits], &[], vocab),
            (&[logits, probs], &one_row(vocab), 1),
            (&[probs, &self.token, &self.history, &self.count], &[], 1),
        ];
        for (kernel, (bindings, params, groups)) in self.kernels.iter().zip(steps) {
            launch(c, kernel, (groups, 1), bindings, params)?;
        }
        Ok(())
    }

    /// Reads what the last step left in every stage.
    pub fn read_stages<D: Device>(&self, c: &ComputeClient<D>) -> Result<Stages, String> {
        let read = |h: &Handle| {
            c.read_one(h.clone())
                .map(|b| b.to_elems::<f32>())
                .map_err(|e| format!("read: {e}"))
        };
        let [x, ln, h, y, logits, probs] = &self.act;
        Ok(Stages {
            x: read(x)?,
            ln: read(ln)?,
            h: read(h)?,
            y: read(y)?,
            logits: read(logits)?,
            probs: read(probs)?,
            token: read(&self.token)?[0].to_bits(),
        })
    }

    /// The tokens the device appended to its history, in order.
    pub fn read_history<D: Device>(&self, c: &ComputeClient<D>) -> Result<Vec<u32>, String> {
        let read = |h: &Handle| {
            c.read_one(h.clone())
                .map(|b| b.to_elems::<u32>())
                .map_err(|e| format!("read: {e}"))
        };
        let count = read(&self.count)?[0] as usize;
        let mut history = read(&self.history)?;
        history.truncate(count);
        Ok(history)
    }
}

fn collect<const N: usize>(all: [Result<Handle, String>; N]) -> Result<[Handle; N], String> {
    let all: Vec<Handle> = all.into_iter().collect::<Result<_, _>>()?;
    Ok(all
        .try_into()
        .unwrap_or_else(|_| unreachable!("N handles in, N out")))
}

/// Runs `steps` decode steps from token `first` on `c` (pinned to one stream): the first eagerly,
/// the rest by replaying a graph captured from one step; checks every step with
/// [`check_step`] and the device's history against the tokens chosen. Returns those tokens.
pub fn run_decode<D: Device>(
    c: &ComputeClient<D>,
    w: &Weights,
    first: u32,
    steps: usize,
) -> Result<Vec<u32>, String> {
    let fail = |what: &'static str| move |e: lockstep::ServerError| format!("{what}: {e}");
    c.graph_prepare().map_err(fail("graph_prepare"))?;
    let model = DecodeModel::upload(c, w, first, steps)?;
    let mut tokens = Vec::with_capacity(steps);
    let mut check = |n: usize, token_in: u32| -> Result<u32, String> {
        let stages = model.read_stages(c)?;
        check_step(w, token_in, &stages).map_err(|e| format!("step {n}: {e}"))?;
        tokens.push(stages.token);
        Ok(stages.token)
    };
    model.launch_step(c)?;
    let mut token = check(0, first)?;
    c.start_capture().map_err(fail("start_capture"))?;
    model.launch_step(c)?;
    let step = c.stop_capture().map_err(fail("stop_capture"))?;
    for n in 1..steps {
        step.replay();
        token = check(n, token)?;
    }
    let history = model.read_history(c)?;
    if history != tokens {
        return Err(format!(
            "the device's history {history:?}, the steps chose {tokens:?}"
        ));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_follow_splitmix64_as_the_torch_baseline_draws_them() {
        // SplitMix64's published first output from state 0.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(
            unit(0, 0),
            (0xE220_A839_7B1D_CDAFu64 >> 40) as f32 / 16_777_216.0
        );
        assert_eq!(
            (fan_in(64), fan_in(128), fan_in(2048)),
            (0.125, 0.0625, 1.0 / 64.0)
        );
        let w = Weights::generate(Dims::SMALL, 7);
        // The values scripts/gpu/torch_baseline.py's self-check prints for the same seed.
        let first = [w.embed[0], w.gamma[0], w.w1[0], w.b_out[95]];
        assert_eq!(
            first.map(f32::to_bits),
            [0x3d99_8680, 0x3f7e_095a, 0xbd78_95c8, 0xbdc2_4b42]
        );
    }
}
