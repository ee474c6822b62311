//! Named stage tensors ("taps") a forward records, for diffing executors and measuring accuracy stage by stage.

/// One recorded stage: `rows` x `cols` values for the tokens of one forward call, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Tap<T> {
    pub name: String,
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<T>,
}

/// The taps of one forward, in the order they were recorded; recording is off unless `enabled`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Taps<T> {
    pub enabled: bool,
    pub list: Vec<Tap<T>>,
}

impl<T: Clone> Taps<T> {
    /// A recorder that keeps every tap.
    pub fn on() -> Taps<T> {
        Taps { enabled: true, list: Vec::new() }
    }

    /// Records a stage when enabled.
    pub fn record(&mut self, name: impl Into<String>, rows: usize, cols: usize, data: &[T]) {
        if self.enabled {
            self.list.push(Tap { name: name.into(), rows, cols, data: data.to_vec() });
        }
    }

    /// The tap with this name.
    pub fn get(&self, name: &str) -> Option<&Tap<T>> {
        self.list.iter().find(|t| t.name == name)
    }
}
