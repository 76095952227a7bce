//! Recycled frame buffers. Every frame in flight (on a wire, in a switch queue) lives in
//! one of these; events and queues carry the small [`FrameId`]. Buffers are returned to a
//! free list and reused, so the steady state allocates nothing per frame, and a frame
//! crosses a switch without being copied.

/// Largest frame (without FCS) the fabric carries: a 9000-byte MTU jumbo frame plus
/// Ethernet, 802.1Q and a margin, rounded up.
pub const MAX_FRAME_LEN: usize = 9216 + 64;

/// A new, zeroed frame buffer of [`MAX_FRAME_LEN`] bytes.
pub fn new_buffer() -> Box<[u8]> {
    vec![0; MAX_FRAME_LEN].into_boxed_slice()
}

/// Handle of a buffer in the [`FramePool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameId(u32);

struct Slot {
    data: Box<[u8]>,
    len: usize,
    /// Catches a double free, which would hand one buffer to two frames.
    live: bool,
}

/// The buffers of every frame in flight.
#[derive(Default)]
pub struct FramePool {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl FramePool {
    /// A buffer of [`MAX_FRAME_LEN`] bytes holding an empty frame.
    pub fn alloc(&mut self) -> FrameId {
        match self.free.pop() {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                slot.len = 0;
                slot.live = true;
                FrameId(i)
            }
            None => {
                self.slots.push(Slot {
                    data: new_buffer(),
                    len: 0,
                    live: true,
                });
                FrameId((self.slots.len() - 1) as u32)
            }
        }
    }

    /// Returns the buffer to the free list.
    pub fn free(&mut self, id: FrameId) {
        let slot = &mut self.slots[id.0 as usize];
        assert!(slot.live, "frame buffer freed twice");
        slot.live = false;
        self.free.push(id.0);
    }

    /// The frame's bytes.
    pub fn frame(&self, id: FrameId) -> &[u8] {
        let s = &self.slots[id.0 as usize];
        &s.data[..s.len]
    }

    /// The frame's bytes, writable.
    pub fn frame_mut(&mut self, id: FrameId) -> &mut [u8] {
        let s = &mut self.slots[id.0 as usize];
        &mut s.data[..s.len]
    }

    /// The whole buffer, for writing a new frame; then [`set_len`](Self::set_len).
    pub fn buffer_mut(&mut self, id: FrameId) -> &mut [u8] {
        &mut self.slots[id.0 as usize].data
    }

    /// The whole buffer as its box, for a node that may put a buffer of its own in its
    /// place ([`Node::poll_transmit_buffer`](crate::Node::poll_transmit_buffer)); then
    /// [`set_len`](Self::set_len), which checks the buffer's size.
    pub fn buffer_box_mut(&mut self, id: FrameId) -> &mut Box<[u8]> {
        &mut self.slots[id.0 as usize].data
    }

    /// Sets the frame length (at most [`MAX_FRAME_LEN`]).
    pub fn set_len(&mut self, id: FrameId, len: usize) {
        assert!(
            len <= MAX_FRAME_LEN,
            "frame of {len} bytes exceeds MAX_FRAME_LEN"
        );
        assert_eq!(
            self.slots[id.0 as usize].data.len(),
            MAX_FRAME_LEN,
            "a frame buffer of the wrong size"
        );
        self.slots[id.0 as usize].len = len;
    }

    /// Puts `data` (a whole buffer of [`MAX_FRAME_LEN`] bytes) in frame `id`'s place and
    /// returns the buffer it had: a frame changes pools (partitions) without a copy.
    pub fn swap_buffer(&mut self, id: FrameId, data: Box<[u8]>) -> Box<[u8]> {
        assert_eq!(
            data.len(),
            MAX_FRAME_LEN,
            "a frame buffer of the wrong size"
        );
        std::mem::replace(&mut self.slots[id.0 as usize].data, data)
    }

    /// Frame length in bytes.
    pub fn len(&self, id: FrameId) -> usize {
        self.slots[id.0 as usize].len
    }

    /// A new buffer holding a copy of frame `id` (duplication, flooding).
    pub fn clone_frame(&mut self, id: FrameId) -> FrameId {
        let copy = self.alloc();
        let len = self.len(id);
        let (src, dst) = if copy.0 > id.0 {
            let (lo, hi) = self.slots.split_at_mut(copy.0 as usize);
            (&lo[id.0 as usize], &mut hi[0])
        } else {
            let (lo, hi) = self.slots.split_at_mut(id.0 as usize);
            (&hi[0], &mut lo[copy.0 as usize])
        };
        dst.data[..len].copy_from_slice(&src.data[..len]);
        dst.len = len;
        copy
    }

    /// Every buffer back on the free list, allocated and zeroed once and kept: for a new
    /// fabric that takes over this one's buffers ([`Fabric::recycle`]).
    ///
    /// [`Fabric::recycle`]: crate::Fabric::recycle
    pub fn free_all(&mut self) {
        self.free.clear();
        for (i, slot) in self.slots.iter_mut().enumerate().rev() {
            slot.live = false;
            slot.len = 0;
            self.free.push(i as u32);
        }
    }

    /// Buffers allocated so far (in use or free): the high-water mark of frames in flight.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}
