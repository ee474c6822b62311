// A block of outputs for the tile cores: weight row base, end of its x rows, output column base, columns.
struct Entry { wbase: u32, end: u32, cbase: u32, cols: u32 }
