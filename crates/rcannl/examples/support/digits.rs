//! The handwritten digits (the 8×8 images of the UCI data set, 1797 of them, in `data/digits.csv`:
//! 64 pixels from 0 to 16 and the label per line) split the same way for every example that
//! trains on them.

use rcannl::nn::data::Rng;
use rcannl::prelude::*;

/// The number of classes.
pub const CLASSES: usize = 10;

/// The images scaled to [0, 1] and their labels, shuffled (by a fixed seed), split into
/// training batches of `batch` images and a test set of the rest (about a fifth).
pub struct Split {
    pub train_pixels: Vec<f64>,
    pub train_labels: Vec<usize>,
    pub batches: usize,
    pub test_pixels: Vec<f64>,
    pub test_labels: Vec<usize>,
}

/// The images (64 pixels each) and labels in `data/digits.csv`.
struct Digits {
    data: Vec<u8>,
    target: Vec<u8>,
}

fn load() -> Result<Digits, TensorError> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/digits.csv");
    let error = |message: String| TensorError::new(format!("reading {path}: {message}"));
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let mut digits = Digits {
        data: Vec::new(),
        target: Vec::new(),
    };
    for (line, row) in text.lines().enumerate() {
        let cells = row
            .split(',')
            .map(str::parse::<u8>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| error(format!("line {}: {e}", line + 1)))?;
        let shape_ok = |(label, pixels): &(&u8, &[u8])| {
            pixels.len() == 64 && **label <= 9 && pixels.iter().all(|&p| p <= 16)
        };
        let Some((label, pixels)) = cells.split_last().filter(shape_ok) else {
            return Err(error(format!(
                "line {}: expected 64 pixels from 0 to 16 and a label from 0 to 9",
                line + 1
            )));
        };
        digits.data.extend_from_slice(pixels);
        digits.target.push(*label);
    }
    Ok(digits)
}

pub fn split(batch: usize) -> Result<Split, TensorError> {
    let digits = load()?;
    let mut order: Vec<usize> = (0..digits.target.len()).collect();
    let mut rng = Rng::new(7);
    for i in (1..order.len()).rev() {
        order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    let batches = (order.len() * 4 / 5) / batch;
    let (train, test) = order.split_at(batches * batch);
    let pixels = |i: usize| {
        digits.data[i * 64..(i + 1) * 64]
            .iter()
            .map(|&v| f64::from(v) / 16.0)
            .collect::<Vec<_>>()
    };
    let label = |i: usize| digits.target[i] as usize;
    Ok(Split {
        train_pixels: train.iter().flat_map(|&i| pixels(i)).collect(),
        train_labels: train.iter().map(|&i| label(i)).collect(),
        batches,
        test_pixels: test.iter().flat_map(|&i| pixels(i)).collect(),
        test_labels: test.iter().map(|&i| label(i)).collect(),
    })
}

impl Split {
    /// The split as data tensors of `graph`: the training images (`batches, batch | -> 8, 8, 1`),
    /// their labels (`batches, batch | ->`, class ids) and the test images (`n | -> 8, 8, 1`).
    pub fn tensors(&self, graph: &Graph, batch: usize) -> [Tensor; 3] {
        [
            graph
                .data("images")
                .shape(&format!("{},{batch}|->8,8,1", self.batches))
                .values(self.train_pixels.clone())
                .build(),
            graph
                .data("labels")
                .shape(&format!("{},{batch}|->", self.batches))
                .values(self.train_labels.iter().map(|&l| l as f64).collect())
                .build(),
            graph
                .data("test images")
                .shape(&format!("{}|->8,8,1", self.test_labels.len()))
                .values(self.test_pixels.clone())
                .build(),
        ]
    }

    /// How many test images `logits` (the test set's, `CLASSES` per image) classify right, by
    /// their largest logit.
    pub fn test_right(&self, logits: &[f64]) -> usize {
        logits
            .chunks(CLASSES)
            .zip(&self.test_labels)
            .filter(|(row, label)| {
                (0..CLASSES).max_by(|a, b| row[*a].total_cmp(&row[*b])) == Some(**label)
            })
            .count()
    }
}
