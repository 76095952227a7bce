//! A bitmap with one bit per QP index an ICM may hold (`abi::MAX_ICM_QPS`, 65,536), and
//! a summary bit per 64-bit word of it that says whether the word has any bit set. The
//! doorbell latch and the runtime's pending set are such maps: finding the QPs whose
//! doorbell rang costs the summary (16 words) plus the words that hold a rung QP, not a
//! read of all 1,024 words per poll (`docs/scale.md`, "Doorbells for every QP").

/// Words of a bitmap with one bit per QP index an ICM may hold.
pub const QP_MAP_WORDS: usize = (crate::abi::MAX_ICM_QPS / 64) as usize;

/// Words of the summary: one bit per word of the map.
const SUMMARY_WORDS: usize = QP_MAP_WORDS.div_ceil(64);

/// The map. Invariant: summary bit `w` is set exactly when word `w` is not zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpMap {
    words: [u64; QP_MAP_WORDS],
    summary: [u64; SUMMARY_WORDS],
}

impl Default for QpMap {
    fn default() -> Self {
        Self::new()
    }
}

impl QpMap {
    /// No bit set.
    pub const fn new() -> Self {
        Self {
            words: [0; QP_MAP_WORDS],
            summary: [0; SUMMARY_WORDS],
        }
    }

    /// Bit `index`; false beyond the map.
    pub fn get(&self, index: u32) -> bool {
        self.word(index as usize / 64) & (1 << (index % 64)) != 0
    }

    /// Sets bit `index` (beyond the map: nothing, as hardware drops such an index).
    pub fn set(&mut self, index: u32) {
        let w = index as usize / 64;
        if let Some(word) = self.words.get_mut(w) {
            *word |= 1 << (index % 64);
            self.mark(w, true);
        }
    }

    /// Clears bit `index`.
    pub fn clear(&mut self, index: u32) {
        let w = index as usize / 64;
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1 << (index % 64));
            let any = *word != 0;
            self.mark(w, any);
        }
    }

    /// Word `w` (bits `64 w ..`); 0 beyond the map.
    pub fn word(&self, w: usize) -> u64 {
        self.words.get(w).copied().unwrap_or(0)
    }

    /// The first word at or after `w`, and before `end`, with a bit set: the summary is
    /// read, not the empty words.
    pub fn next_word(&self, mut w: usize, end: usize) -> Option<usize> {
        while w < end {
            let s = self.summary.get(w / 64)? >> (w % 64);
            if s != 0 {
                let found = w + s.trailing_zeros() as usize;
                return (found < end).then_some(found);
            }
            w = (w / 64 + 1) * 64;
        }
        None
    }

    /// ORs every set bit into `into` and clears this map (a latch read and reset):
    /// costs the summary plus the words with a bit set.
    pub fn drain_into(&mut self, into: &mut QpMap) {
        for (s, summary) in self.summary.iter_mut().enumerate() {
            let mut bits = core::mem::take(summary);
            while bits != 0 {
                let w = s * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(word) = self.words.get_mut(w) {
                    let v = core::mem::take(word);
                    if let Some(to) = into.words.get_mut(w) {
                        *to |= v;
                        into.mark(w, true);
                    }
                }
            }
        }
    }

    /// Clears every bit, in place.
    pub fn clear_all(&mut self) {
        self.words.fill(0);
        self.summary.fill(0);
    }

    /// Makes this map a copy of the plain bitmap `words` (a platform without a
    /// doorbell latch: every existing QP counts as rung). Costs the whole map.
    pub fn copy_from_words(&mut self, words: &[u64; QP_MAP_WORDS]) {
        self.words = *words;
        self.summary = [0; SUMMARY_WORDS];
        for (w, &v) in words.iter().enumerate() {
            if v != 0 {
                self.mark(w, true);
            }
        }
    }

    fn mark(&mut self, w: usize, any: bool) {
        if let Some(s) = self.summary.get_mut(w / 64) {
            let b = 1u64 << (w % 64);
            *s = if any { *s | b } else { *s & !b };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_follows_the_words() {
        let mut m = QpMap::new();
        assert_eq!(m.next_word(0, QP_MAP_WORDS), None);
        for i in [0, 63, 64, 4_095, 40_000, 65_535] {
            m.set(i);
            assert!(m.get(i));
        }
        m.set(70_000); // beyond the map: dropped
        assert!(!m.get(70_000));
        let (mut found, mut n, mut w) = ([0usize; 8], 0, 0);
        while let Some(f) = m.next_word(w, QP_MAP_WORDS) {
            found[n] = f;
            n += 1;
            w = f + 1;
        }
        assert_eq!(found[..n], [0, 1, 63, 625, 1_023]);
        assert_eq!(m.next_word(2, 63), None, "end is exclusive");
        m.clear(0);
        assert_eq!(m.next_word(0, QP_MAP_WORDS), Some(0), "bit 63 is still set");
        m.clear(63);
        assert_eq!(m.next_word(0, QP_MAP_WORDS), Some(1));

        let mut into = QpMap::new();
        into.set(5);
        m.drain_into(&mut into);
        assert_eq!(m, QpMap::new());
        for i in [5, 64, 4_095, 40_000, 65_535] {
            assert!(into.get(i), "{i}");
        }
        let mut plain = [0u64; QP_MAP_WORDS];
        plain[700] = 1 << 9;
        into.copy_from_words(&plain);
        assert_eq!(into.next_word(0, QP_MAP_WORDS), Some(700));
        assert!(into.get(700 * 64 + 9) && !into.get(5));
    }
}
