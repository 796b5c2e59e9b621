// The prelude's functions of rc_cond where it is f32: a routine holding no f64 tensor.

fn rc_cond_isnan(x: f32) -> bool { return rc_isnan(x); }
