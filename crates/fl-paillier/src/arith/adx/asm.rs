//! The x86-64 `mulx`/`adcx`/`adox` instructions (BMI2 and ADX) of the radix-2^64 kernel,
//! in inline assembly: the rows of a schoolbook product ([`Adx::mul_rows`]), of a
//! squaring's triangle of cross products ([`Adx::sqr_rows`]) and its doubling with the
//! diagonal ([`Adx::sqr_diag`]), and of a Montgomery reduction ([`Adx::redc_rows`]), each
//! with its loop over rows inside the assembly.
//!
//! A row runs two independent carry chains: the high half of a[j − 1]·b joins the low half
//! of a[j]·b along the `adcx` (CF) chain and the old word r[j] joins along the `adox` (OF)
//! chain, so a word of the row costs one `mulx` and two flag additions (the two chains run
//! in parallel; on current cores the flag additions, not the multiplier, bound the speed).
//! The loop is unrolled eight times (the high halves alternate between two registers); a
//! row whose length is not a multiple of eight enters the body part-way, and the loop is
//! closed by `lea`/`jrcxz`, which leave both carry chains alone.
//!
//! **One of fl-paillier's `unsafe` modules** (SECURITY.md names each). Its `unsafe` blocks
//! are the `asm!` blocks themselves, each reachable only through an [`Adx`] token (which
//! exists only after `is_x86_feature_detected!` confirmed `bmi2` and `adx` on the running
//! CPU or, with the `hazmat` feature, confirmed `bmi2` after the caller of the `unsafe`
//! `hazmat::assume_cpu_has_adx_under_valgrind` vouched for ADX) and each preceded by the
//! bounds checks that keep its memory accesses inside the slices it was given. The
//! assembly is straight-line in the values: the loop count and the entry point depend on
//! the row length only; there is no branch or address derived from a word of an operand.

#![allow(unsafe_code)]

#[rustfmt::skip]
/// One unrolled step of a row r += a·b at byte offset `$off` (b in rdx, the row's words
/// at {pi}, a's at {pa}): the product a[j]·b into rax (low) and `$hi`; rax += `$prev`
/// (the previous high half) along CF and += r[j] along OF; r[j] = rax.
macro_rules! step {
    ($off:literal, $hi:literal, $prev:literal) => {
        concat!(
            "mulx ", $hi, ", rax, [{pa} + ", $off, "]\n",
            "adcx rax, ", $prev, "\n",
            "adox rax, [{pi} + ", $off, "]\n",
            "mov [{pi} + ", $off, "], rax\n",
        )
    };
}

#[rustfmt::skip]
/// A row's body: eight steps (entered at step `skip` through r11, with CF = OF = 0 and
/// r8 = r9 = 0), looped rcx times (`lea`/`jrcxz` leave the carry chains alone), then the
/// last high half (r9) absorbs both chains' carries: r9 is the row's high word (the row's
/// sum fits one more word, so it does not overflow). Labels 2, 31–37, 4.
macro_rules! row {
    () => {
        concat!(
            "2:\n",
            step!("0", "r8", "r9"),
            "31:\n",
            step!("8", "r9", "r8"),
            "32:\n",
            step!("16", "r8", "r9"),
            "33:\n",
            step!("24", "r9", "r8"),
            "34:\n",
            step!("32", "r8", "r9"),
            "35:\n",
            step!("40", "r9", "r8"),
            "36:\n",
            step!("48", "r8", "r9"),
            "37:\n",
            step!("56", "r9", "r8"),
            "lea {pa}, [{pa} + 64]\n",
            "lea {pi}, [{pi} + 64]\n",
            "lea rcx, [rcx - 1]\n",
            "jrcxz 4f\n",
            "jmp 2b\n",
            "4:\n",
            "mov eax, 0\n",
            "adcx r9, rax\n",
            "adox r9, rax\n",
        )
    };
}

#[rustfmt::skip]
/// r11 = the address of step rax (0 ≤ rax < 8) of the next [`row`] (its labels 2, 31–37);
/// rax is a public function of the row length. Clobbers the flags.
macro_rules! entry {
    () => {
        concat!(
            "lea r11, [rip + 2f]\n",
            "cmp rax, 1\n", "jne 61f\n", "lea r11, [rip + 31f]\n", "61:\n",
            "cmp rax, 2\n", "jne 62f\n", "lea r11, [rip + 32f]\n", "62:\n",
            "cmp rax, 3\n", "jne 63f\n", "lea r11, [rip + 33f]\n", "63:\n",
            "cmp rax, 4\n", "jne 64f\n", "lea r11, [rip + 34f]\n", "64:\n",
            "cmp rax, 5\n", "jne 65f\n", "lea r11, [rip + 35f]\n", "65:\n",
            "cmp rax, 6\n", "jne 66f\n", "lea r11, [rip + 36f]\n", "66:\n",
            "cmp rax, 7\n", "jne 67f\n", "lea r11, [rip + 37f]\n", "67:\n",
        )
    };
}

/// Proof that the running CPU has BMI2 (`mulx`) and ADX (`adcx`, `adox`) — or, after the
/// `unsafe` `assume_adx` (hazmat, valgrind only), that its caller vouched for ADX: the
/// only way to reach the assembly.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Adx(());

/// A row of n words: (steps of the unrolled body skipped at its entry, passes of the body).
fn row_shape(n: usize) -> (usize, usize) {
    ((8 - n % 8) % 8, n.div_ceil(8))
}

/// Set by `hazmat::assume_cpu_has_adx_under_valgrind`: valgrind's JIT executes `adcx` and
/// `adox` whatever the host, but its emulated CPUID hides ADX, so the constant-time
/// harness declares it in order to run this kernel under memcheck.
#[cfg(feature = "hazmat")]
static ASSUME_ADX: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// See [`ASSUME_ADX`]: from this call on, [`Adx::detect`] hands out tokens on any CPU
/// that reports BMI2.
///
/// # Safety
///
/// Whatever executes this process from now on must execute `mulx`, `adcx` and `adox` (a
/// CPU with BMI2 and ADX, or valgrind's JIT): the [`Adx`] token is the assembly's only
/// guard. `hazmat::assume_cpu_has_adx_under_valgrind` passes this on to its caller.
#[cfg(feature = "hazmat")]
pub(crate) unsafe fn assume_adx() {
    ASSUME_ADX.store(true, core::sync::atomic::Ordering::Relaxed);
}

/// Whether ADX was declared present (hazmat, for valgrind only).
fn adx_assumed() -> bool {
    #[cfg(feature = "hazmat")]
    {
        ASSUME_ADX.load(core::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(feature = "hazmat"))]
    {
        false
    }
}

impl Adx {
    /// The token, if the CPU has both extensions.
    pub(crate) fn detect() -> Option<Self> {
        if std::arch::is_x86_feature_detected!("bmi2")
            && (std::arch::is_x86_feature_detected!("adx") || adx_assumed())
        {
            Some(Self(()))
        } else {
            None
        }
    }

    /// p = a·b for |a| = |b| = n ≥ 1 and |p| = 2n (schoolbook: p is cleared, then row i
    /// adds a·b[i] at word i and stores its high word at the fresh word i + n). Leaves `p`
    /// untouched if the lengths do not fit.
    pub(crate) fn mul_rows(self, p: &mut [u64], a: &[u64], b: &[u64]) {
        let n = a.len();
        if n == 0 || b.len() != n || p.len() != 2 * n {
            return;
        }
        p.fill(0);
        let (skip, passes) = row_shape(n);
        let cfg = [0, 8 * skip as u64, passes as u64, 0];
        // SAFETY: `self` proves bmi2 and adx on this CPU. Row i (i < n) reads b[i], reads
        // a[0 .. n] and reads and writes p[i .. i + n] through pointers moved back by
        // `skip` words, entered at step `skip` of the body so that the first access is
        // a[0] and p[i] (the skipped steps never run: the pointers outside the slices are
        // never dereferenced); the row's high word goes to p[i + n] (< 2n = |p|). `cfg`
        // is a local array of four words. Only the named registers are clobbered, the
        // flags are declared clobbered, no stack is used.
        unsafe {
            core::arch::asm!(
                entry!(),
                "5:",
                "mov rdx, [{pb}]",
                "mov {pi}, {pr}",
                "sub {pi}, [{cfg} + 8]",
                "mov {pa}, {a}",
                "sub {pa}, [{cfg} + 8]",
                "mov rcx, [{cfg} + 16]",
                "xor r8d, r8d",
                "xor r9d, r9d",
                "jmp r11",
                row!(),
                "mov [{pi}], r9",
                "lea {pr}, [{pr} + 8]",
                "lea {pb}, [{pb} + 8]",
                "dec {rows}",
                "jnz 5b",
                pr = inout(reg) p.as_mut_ptr() => _,
                pb = inout(reg) b.as_ptr() => _,
                a = in(reg) a.as_ptr(),
                rows = inout(reg) n => _,
                cfg = in(reg) cfg.as_ptr(),
                pi = out(reg) _,
                pa = out(reg) _,
                inout("rax") skip => _,
                out("rcx") _,
                out("rdx") _,
                out("r8") _,
                out("r9") _,
                out("r11") _,
                options(nostack),
            );
        }
    }

    /// The cross products of a² for |a| = n ≥ 2 into p (|p| = 2n): p is cleared, then row
    /// i (i < n − 1) adds a[i + 1 ..]·a[i] at word 2i + 1 and stores its high word at the
    /// fresh word i + n. Leaves `p` untouched if the lengths do not fit.
    pub(crate) fn sqr_rows(self, p: &mut [u64], a: &[u64]) {
        let n = a.len();
        if n < 2 || p.len() != 2 * n {
            return;
        }
        p.fill(0);
        // SAFETY: `self` proves bmi2 and adx on this CPU. Row i has length L = n − 1 − i
        // (from n − 1 down to 1): it reads a[i] and a[i + 1 .. n] and reads and writes
        // p[2i + 1 .. i + n] through pointers moved back by skip = −L mod 8 words, entered
        // at step `skip` so that the first access is a[i + 1] and p[2i + 1]; its high word
        // goes to p[i + n] (< 2n). Only the named registers are clobbered, the flags are
        // declared clobbered, no stack is used.
        unsafe {
            core::arch::asm!(
                "5:",
                "mov rax, {len}",
                "neg rax",
                "and rax, 7",
                entry!(),
                "mov rdx, [{arow} - 8]",
                "neg rax",
                "lea {pi}, [{pr} + 8*rax]",
                "lea {pa}, [{arow} + 8*rax]",
                "lea rcx, [{len} + 7]",
                "shr rcx, 3",
                "xor r8d, r8d",
                "xor r9d, r9d",
                "jmp r11",
                row!(),
                "mov [{pi}], r9",
                "lea {pr}, [{pr} + 16]",
                "lea {arow}, [{arow} + 8]",
                "dec {len}",
                "jnz 5b",
                pr = inout(reg) p.as_mut_ptr().wrapping_add(1) => _,
                arow = inout(reg) a.as_ptr().wrapping_add(1) => _,
                len = inout(reg) n - 1 => _,
                pi = out(reg) _,
                pa = out(reg) _,
                out("rax") _,
                out("rcx") _,
                out("rdx") _,
                out("r8") _,
                out("r9") _,
                out("r11") _,
                options(nostack),
            );
        }
    }

    /// p = 2·p + Σ a[i]²·2^(128i) for |a| = n ≥ 1, |p| = 2n (the squaring's doubled cross
    /// products plus the diagonal; the result must fit 2n words, as a² does): the doubling
    /// runs along CF (`adcx x, x`), the diagonal along OF. Leaves `p` untouched if the
    /// lengths do not fit.
    pub(crate) fn sqr_diag(self, p: &mut [u64], a: &[u64]) {
        let n = a.len();
        if n == 0 || p.len() != 2 * n {
            return;
        }
        // SAFETY: `self` proves bmi2 and adx on this CPU. Iteration i (i < n) reads a[i]
        // and reads and writes p[2i], p[2i + 1] (< 2n). Only the named registers are
        // clobbered, the flags are declared clobbered, no stack is used.
        unsafe {
            core::arch::asm!(
                "xor eax, eax",
                "2:",
                "mov rdx, [{pa}]",
                "mulx r9, r8, rdx",
                "mov r10, [{pp}]",
                "mov r11, [{pp} + 8]",
                "adcx r10, r10",
                "adcx r11, r11",
                "adox r10, r8",
                "adox r11, r9",
                "mov [{pp}], r10",
                "mov [{pp} + 8], r11",
                "lea {pa}, [{pa} + 8]",
                "lea {pp}, [{pp} + 16]",
                "lea rcx, [rcx - 1]",
                "jrcxz 3f",
                "jmp 2b",
                "3:",
                pp = inout(reg) p.as_mut_ptr() => _,
                pa = inout(reg) a.as_ptr() => _,
                inout("rcx") n => _,
                out("rax") _,
                out("rdx") _,
                out("r8") _,
                out("r9") _,
                out("r10") _,
                out("r11") _,
                options(nostack),
            );
        }
    }

    /// The rows of a Montgomery reduction of p (|p| = 2n, n = |m| ≥ 1) with
    /// m0 = −m⁻¹ mod 2^64: row i adds m·yᵢ at word i for yᵢ = p[i]·m0 mod 2^64 (which
    /// clears p[i]) and parks its high word, which belongs at word i + n, in p[i]. After
    /// the rows, p·2^(−64n) ≡ p[n .. 2n] + p[0 .. n] (mod m). Leaves `p` untouched if the
    /// lengths do not fit.
    pub(crate) fn redc_rows(self, p: &mut [u64], m: &[u64], m0: u64) {
        let n = m.len();
        if n == 0 || p.len() != 2 * n {
            return;
        }
        let (skip, passes) = row_shape(n);
        let mut cfg = [
            m0,
            8 * skip as u64,
            passes as u64,
            m.as_ptr().wrapping_sub(skip) as u64,
        ];
        // SAFETY: `self` proves bmi2 and adx on this CPU. Row i (i < n) reads and writes
        // p[i], reads m[0 .. n] and reads and writes p[i .. i + n] (< 2n) through pointers
        // moved back by `skip` words, entered at step `skip` so that the first access is
        // m[0] and p[i] (the skipped steps never run). `cfg` is a local array of four
        // words (its last word is m's address moved back by `skip` words, only used as a
        // base). Only the named registers are clobbered, the flags are declared clobbered,
        // no stack is used.
        unsafe {
            core::arch::asm!(
                entry!(),
                "5:",
                "mov rdx, [{pr}]",
                "imul rdx, [{cfg}]",
                "mov {pi}, {pr}",
                "sub {pi}, [{cfg} + 8]",
                "mov {pa}, [{cfg} + 24]",
                "mov rcx, [{cfg} + 16]",
                "xor r8d, r8d",
                "xor r9d, r9d",
                "jmp r11",
                row!(),
                "mov [{pr}], r9",
                "lea {pr}, [{pr} + 8]",
                "dec {rows}",
                "jnz 5b",
                pr = inout(reg) p.as_mut_ptr() => _,
                rows = inout(reg) n => _,
                cfg = in(reg) cfg.as_ptr(),
                pi = out(reg) _,
                pa = out(reg) _,
                inout("rax") skip => _,
                out("rcx") _,
                out("rdx") _,
                out("r8") _,
                out("r9") _,
                out("r11") _,
                options(nostack),
            );
        }
        // m0 is derived from the (possibly secret) modulus: wipe the stack copy.
        zeroize::Zeroize::zeroize(&mut cfg[0]);
    }

    /// The end of a Montgomery reduction after [`Adx::redc_rows`]: t = p[n .. 2n] + p[0 .. n]
    /// with carry c (so (c, t) < 2m), then out = (c, t) − m if that is ≥ m, else t, the
    /// choice made with a mask (no branch). `p`'s upper half is overwritten with t.
    /// Leaves `out` untouched if the lengths do not fit.
    pub(crate) fn redc_finish(self, out: &mut [u64], p: &mut [u64], m: &[u64]) {
        let n = m.len();
        if n == 0 || out.len() != n || p.len() != 2 * n {
            return;
        }
        let (lo, hi) = p.split_at_mut(n);
        // SAFETY: `self` proves the CPU runs x86-64 code with BMI2/ADX (only base
        // instructions are used here). Each of the three loops runs n iterations with index
        // i < n into hi, lo, m and out (each of n words). `dec` leaves CF alone, so the
        // add and subtract chains run across iterations. Only the named registers are
        // clobbered, the flags are declared clobbered, no stack is used.
        unsafe {
            core::arch::asm!(
                "xor {i:e}, {i:e}",
                "mov rcx, {n}",
                "2:",
                "mov rax, [{hi} + 8*{i}]",
                "adc rax, [{lo} + 8*{i}]",
                "mov [{hi} + 8*{i}], rax",
                "lea {i}, [{i} + 1]",
                "dec rcx",
                "jnz 2b",
                // rdx = all ones if the addition carried.
                "sbb rdx, rdx",
                "xor {i:e}, {i:e}",
                "mov rcx, {n}",
                "3:",
                "mov rax, [{hi} + 8*{i}]",
                "sbb rax, [{m} + 8*{i}]",
                "mov [{out} + 8*{i}], rax",
                "lea {i}, [{i} + 1]",
                "dec rcx",
                "jnz 3b",
                // r8 = all ones if t − m borrowed; keep t exactly when it borrowed and the
                // addition did not carry.
                "sbb r8, r8",
                "not rdx",
                "and r8, rdx",
                "xor {i:e}, {i:e}",
                "mov rcx, {n}",
                "4:",
                "mov rax, [{out} + 8*{i}]",
                "mov rdx, [{hi} + 8*{i}]",
                "xor rdx, rax",
                "and rdx, r8",
                "xor rax, rdx",
                "mov [{out} + 8*{i}], rax",
                "lea {i}, [{i} + 1]",
                "dec rcx",
                "jnz 4b",
                hi = in(reg) hi.as_mut_ptr(),
                lo = in(reg) lo.as_ptr(),
                m = in(reg) m.as_ptr(),
                out = in(reg) out.as_mut_ptr(),
                n = in(reg) n,
                i = out(reg) _,
                out("rax") _,
                out("rcx") _,
                out("rdx") _,
                out("r8") _,
                options(nostack),
            );
        }
    }
}
