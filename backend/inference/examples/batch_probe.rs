//! Decoding speed of the embedded model by batch size:
//! `batch_probe MODEL.gguf [--stored | --f32]` (the matrices as the file holds them, or dense).
use candle_core::{Device, Tensor};
use lachesis_inference::Precision;
use lachesis_inference::llama::Llama;
use std::time::Instant;

fn main() -> candle_core::Result<()> {
    let path = std::env::args()
        .nth(1)
        .expect("usage: batch_probe MODEL.gguf [--stored | --f32]");
    let precision = match std::env::args().nth(2).as_deref() {
        Some("--stored") => Precision::Stored,
        Some("--f32") => Precision::F32,
        _ => Precision::Quantized,
    };
    let mut f = std::fs::File::open(&path)?;
    let c = candle_core::quantized::gguf_file::Content::read(&mut f)?;
    let t0 = Instant::now();
    let model = Llama::from_gguf(&c, &mut f, 4096, precision)?;
    println!("load {:.2}s ({precision:?})", t0.elapsed().as_secs_f64());
    let prompt = Tensor::new(vec![100u32; 40].as_slice(), &Device::Cpu)?.unsqueeze(0)?;
    let mut cache = model.new_cache();
    let t0 = Instant::now();
    model.forward(&prompt, 0, &mut cache, false)?;
    println!(
        "prompt of 40 tokens: {:.0} ms",
        t0.elapsed().as_secs_f64() * 1000.0
    );
    for n in [1usize, 2, 4, 8, 16] {
        let mut cache = cache.repeat_rows(n)?;
        let steps = 32;
        let t0 = Instant::now();
        for step in 0..steps {
            let x = Tensor::new(vec![200u32; n].as_slice(), &Device::Cpu)?.unsqueeze(1)?;
            model.forward(&x, 40 + step, &mut cache, false)?;
        }
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "n={n:2}: {:6.1} ms/step {:6.1} tok/s",
            dt * 1000.0 / steps as f64,
            (n * steps) as f64 / dt
        );
    }
    Ok(())
}
