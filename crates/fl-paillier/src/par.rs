//! Parallel maps (with the `rayon` feature; sequential without it) and the per-item seeds
//! that keep randomised batch operations independent of the thread count.

use rand::CryptoRng;
use zeroize::Zeroize;

/// Maps `f` over `xs`, in parallel with the `rayon` feature.
pub(crate) fn map_slice<T, U, F>(xs: &[T], f: F) -> Vec<U>
where
    T: Sync,
    U: Send,
    F: Fn(&T) -> U + Sync + Send,
{
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        xs.par_iter().map(f).collect()
    }
    #[cfg(not(feature = "rayon"))]
    {
        xs.iter().map(f).collect()
    }
}

/// Maps `f` over consecutive chunks of at most `chunk` items of `xs` (chunks in parallel
/// with the `rayon` feature) and concatenates the results in order: for the multi-buffer
/// kernels, which work on up to eight values at once.
pub(crate) fn map_chunks<T, U, F>(xs: &[T], chunk: usize, f: F) -> Vec<U>
where
    T: Sync,
    U: Send,
    F: Fn(&[T]) -> Vec<U> + Sync + Send,
{
    let chunks: Vec<&[T]> = xs.chunks(chunk.max(1)).collect();
    map_slice(&chunks, |c| f(c)).into_iter().flatten().collect()
}

/// Runs `a` and `b` (on two rayon threads with the `rayon` feature).
pub(crate) fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    #[cfg(feature = "rayon")]
    {
        rayon::join(a, b)
    }
    #[cfg(not(feature = "rayon"))]
    {
        (a(), b())
    }
}

/// Item i of `xs` with the seed of its own ChaCha20 stream (the i-th 32 bytes drawn from
/// the caller's generator), so results do not depend on how items are scheduled. The seeds
/// are wiped when the batch is dropped.
pub(crate) struct Seeded<'a, T> {
    jobs: Vec<(&'a T, [u8; 32])>,
}

impl<'a, T> Seeded<'a, T> {
    /// Pairs every item of `xs` with 32 bytes drawn from `rng`, in order.
    pub(crate) fn draw<R: CryptoRng + ?Sized>(xs: &'a [T], rng: &mut R) -> Self {
        let mut jobs = Vec::with_capacity(xs.len());
        for x in xs {
            let mut seed = [0u8; 32];
            rng.fill_bytes(&mut seed);
            jobs.push((x, seed));
        }
        Self { jobs }
    }

    /// The items with their seeds.
    pub(crate) fn jobs(&self) -> &[(&'a T, [u8; 32])] {
        &self.jobs
    }
}

impl<T> Drop for Seeded<'_, T> {
    fn drop(&mut self) {
        for (_, seed) in &mut self.jobs {
            seed.zeroize();
        }
    }
}

/// The ChaCha20 generator of one seeded item.
pub(crate) fn item_rng(seed: &[u8; 32]) -> rand::rngs::ChaCha20Rng {
    <rand::rngs::ChaCha20Rng as rand::SeedableRng>::from_seed(*seed)
}

/// Maps `f` over `xs` (in parallel with the `rayon` feature), giving item i its own
/// ChaCha20 stream seeded with the i-th 32 bytes drawn from `rng`, so the output does not
/// depend on the thread count. The seeds are wiped afterwards.
pub(crate) fn map_slice_seeded<T, U, R, F>(xs: &[T], rng: &mut R, f: F) -> Vec<U>
where
    T: Sync,
    U: Send,
    R: CryptoRng + ?Sized,
    F: Fn(&T, &mut rand::rngs::ChaCha20Rng) -> U + Sync + Send,
{
    let seeded = Seeded::draw(xs, rng);
    map_slice(seeded.jobs(), |(x, seed)| f(x, &mut item_rng(seed)))
}
