//! A job's images in the lane host: their spans checked against the prompt, and the tower run for the spans a cached prefix does not cover.
use super::job::Job;
use crate::engine::{Engine, EngineError, Placed};
use crate::exec::Executor;
use crate::model::forward::vision::{span_len, ImagePatches};
use crate::model::taps::Taps;

/// Runs the tower for each of the job's images whose span the cached prefix does not cover; their engine images, placed.
pub fn run_tower<E: Executor>(engine: &mut Engine<'_, '_, E>, job: &mut Job, cached: usize) -> Result<Vec<Placed>, EngineError> {
    let mut placed = Vec::new();
    for img in job.images.iter_mut().filter(|i| i.at + i.len > cached) {
        let patches = std::mem::take(&mut img.patches);
        let input = ImagePatches { grid_h: img.grid_h, grid_w: img.grid_w, data: &patches };
        match engine.add_image(&input, img.llm_h, img.llm_w, &mut Taps::default()) {
            Ok(id) => placed.push(Placed { image: id, at: img.at, len: img.len }),
            Err(e) => {
                free(engine, placed);
                return Err(e);
            }
        }
    }
    Ok(placed)
}

/// Frees placed images' embeddings.
pub fn free<E: Executor>(engine: &mut Engine<'_, '_, E>, placed: Vec<Placed>) {
    for p in placed {
        let _ = engine.remove_image(p.image);
    }
}

/// Whether a job's image spans lie in its prompt, in order and apart, each with patches for its grid and the length its rows give.
pub fn images_fit(job: &Job) -> Result<(), String> {
    let mut end = 0;
    for (k, img) in job.images.iter().enumerate() {
        let stop = img.at.checked_add(img.len).filter(|&e| e <= job.prompt.len() && img.at >= end && img.len >= 3);
        let Some(stop) = stop else { return Err(format!("image {k}'s span {}..+{} does not lie in the prompt of {} positions after the previous span", img.at, img.len, job.prompt.len())) };
        let cells = img.grid_h * img.grid_w;
        if cells == 0 || img.patches.is_empty() || img.patches.len() % cells != 0 || span_len(img.llm_h, img.llm_w) != img.len {
            return Err(format!("image {k}: {} patch values for a {}x{} grid and a span of {} for {}x{} rows", img.patches.len(), img.grid_h, img.grid_w, img.len, img.llm_h, img.llm_w));
        }
        end = stop;
    }
    Ok(())
}
