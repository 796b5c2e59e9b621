//! Plots as PNG files: a loss curve, and a classifier's decision regions over 2-D data. Text uses
//! a bundled font (DejaVu Sans), so plots need nothing installed.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use rcannl_tensor::TensorError;

static FONT: Once = Once::new();

fn font() {
    FONT.call_once(|| {
        // The bundled file is a valid font; registration cannot fail on it.
        let _ = register_font(
            "sans-serif",
            FontStyle::Normal,
            include_bytes!("../assets/DejaVuSans.ttf"),
        );
    });
}

fn plot_error(e: impl std::fmt::Display) -> TensorError {
    TensorError::new(format!("plot: {e}"))
}

/// The loss of each epoch, as a line.
pub fn loss_curve(path: &Path, losses: &[f64]) -> Result<(), TensorError> {
    font();
    let root = BitMapBackend::new(path, (640, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let top = losses.iter().copied().fold(f64::MIN_POSITIVE, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption("training loss", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(1..losses.len().max(2), 0.0..top * 1.05)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("loss")
        .draw()
        .map_err(plot_error)?;
    chart
        .draw_series(LineSeries::new(
            losses.iter().enumerate().map(|(i, l)| (i + 1, *l)),
            &BLUE,
        ))
        .map_err(plot_error)?;
    root.present().map_err(plot_error)
}

/// The regions where `score(x, y)` is positive (light red) or not (light blue) over the bounding
/// box of `points`, with the points coloured by their labels (±1), the axes named and a legend.
pub fn decision_boundary(
    path: &Path,
    points: &[[f64; 2]],
    labels: &[f64],
    grid: usize,
    mut score: impl FnMut(&[[f64; 2]]) -> Result<Vec<f64>, TensorError>,
) -> Result<(), TensorError> {
    font();
    let (min_x, max_x) = bounds(points.iter().map(|p| p[0]));
    let (min_y, max_y) = bounds(points.iter().map(|p| p[1]));
    let cells: Vec<[f64; 2]> = (0..grid * grid)
        .map(|i| {
            let (gx, gy) = ((i % grid) as f64 + 0.5, (i / grid) as f64 + 0.5);
            [
                min_x + (max_x - min_x) * gx / grid as f64,
                min_y + (max_y - min_y) * gy / grid as f64,
            ]
        })
        .collect();
    let scores = score(&cells)?;
    let root = BitMapBackend::new(path, (600, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("decision boundary", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(min_x..max_x, min_y..max_y)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("first feature")
        .y_desc("second feature")
        .draw()
        .map_err(plot_error)?;
    let (dx, dy) = ((max_x - min_x) / grid as f64, (max_y - min_y) / grid as f64);
    let region_colour = |positive: bool| {
        if positive {
            RGBColor(255, 205, 205)
        } else {
            RGBColor(205, 220, 255)
        }
    };
    let classes = [(true, "+1", RED), (false, "−1", BLUE)];
    for (positive, name, _) in classes {
        let colour = region_colour(positive);
        chart
            .draw_series(
                cells
                    .iter()
                    .zip(&scores)
                    .filter(|(_, s)| (**s > 0.0) == positive)
                    .map(|(c, _)| {
                        Rectangle::new(
                            [
                                (c[0] - dx / 2.0, c[1] - dy / 2.0),
                                (c[0] + dx / 2.0, c[1] + dy / 2.0),
                            ],
                            colour.filled(),
                        )
                    }),
            )
            .map_err(plot_error)?
            .label(format!("predicted {name}"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    for (positive, name, colour) in classes {
        chart
            .draw_series(
                points
                    .iter()
                    .zip(labels)
                    .filter(|(_, l)| (**l > 0.0) == positive)
                    .map(|(p, _)| Circle::new((p[0], p[1]), 2, colour.filled())),
            )
            .map_err(plot_error)?
            .label(format!("label {name}"))
            .legend(move |(x, y)| Circle::new((x + 5, y), 3, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)
}

/// The range of `values`, widened by a tenth on each side.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let pad = (high - low).max(1e-9) * 0.1;
    (low - pad, high + pad)
}
