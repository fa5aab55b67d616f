//! Loader tests: good files of every format, and bad files that must fail with a clear message
//! naming the file and the line/field.

use aecm::data::{self, LabelColumn, LoadOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn sample(name: &str) -> String {
    format!("{}/sample_data/{name}", env!("CARGO_MANIFEST_DIR"))
}

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("aecm-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p.to_string_lossy().to_string()
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn load(spec: &str) -> aecm::Result<data::Dataset> {
    data::load(spec, &LoadOptions::default())
}

fn err(spec: &str, opts: &LoadOptions) -> String {
    match data::load(spec, opts) {
        Ok(_) => panic!("{spec} loaded but should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn csv_with_header_and_text_labels() {
    let t = TempDir::new("csv1");
    let f = t.file("a.csv", b"x,y,class\n1,2,a\n3,4,b\n5,6,a\n");
    let ds = load(&f).unwrap();
    assert_eq!((ds.n, ds.d), (3, 2));
    assert_eq!(ds.x, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(ds.labels.unwrap(), vec![0, 1, 0]);
    assert_eq!(ds.label_names, vec!["a", "b"]);
}

#[test]
fn tsv_without_header_label_column_options() {
    let t = TempDir::new("tsv");
    let f = t.file("a.tsv", b"1\t2\t7\n3\t4\t8\n");
    let ds = load(&f).unwrap();
    assert_eq!((ds.n, ds.d), (2, 3));
    assert!(
        ds.labels.is_none(),
        "numeric last column is not a label by default"
    );
    let opts = LoadOptions {
        label_column: LabelColumn::Last,
        ..Default::default()
    };
    let ds = data::load(&f, &opts).unwrap();
    assert_eq!(ds.d, 2);
    assert_eq!(ds.label_names, vec!["7", "8"]);
    let opts = LoadOptions {
        label_column: LabelColumn::Index(0),
        ..Default::default()
    };
    let ds = data::load(&f, &opts).unwrap();
    assert_eq!(ds.x, vec![2.0, 7.0, 4.0, 8.0]);
}

#[test]
fn label_column_by_name_and_skip_columns() {
    let t = TempDir::new("named");
    let f = t.file("a.csv", b"id,f1,f2,kind\nA,1,2,x\nB,3,4,y\n");
    let opts = LoadOptions {
        label_column: LabelColumn::Name("kind".into()),
        skip_columns: vec![0],
        ..Default::default()
    };
    let ds = data::load(&f, &opts).unwrap();
    assert_eq!(ds.x, vec![1.0, 2.0, 3.0, 4.0]);
    let e = err(
        &f,
        &LoadOptions {
            label_column: LabelColumn::Name("nope".into()),
            ..Default::default()
        },
    );
    assert!(e.contains("no column named 'nope'"), "{e}");
}

#[test]
fn ragged_rows_are_an_error_naming_the_line() {
    let t = TempDir::new("ragged");
    let f = t.file("r.csv", b"1,2,3\n4,5,6\n7,8\n");
    let e = err(&f, &LoadOptions::default());
    assert!(
        e.contains("r.csv") && e.contains("line 3") && e.contains("2 fields, expected 3"),
        "{e}"
    );
}

#[test]
fn text_in_a_numeric_column_names_file_line_and_column() {
    let t = TempDir::new("text");
    let f = t.file("t.csv", b"a,b,label\n1,2,x\n3,oops,y\n");
    let e = err(&f, &LoadOptions::default());
    assert!(e.contains("t.csv"), "{e}");
    assert!(
        e.contains("line 3, column 2 ('b')") && e.contains("'oops' is not a number"),
        "{e}"
    );
}

#[test]
fn empty_file_is_an_error() {
    let t = TempDir::new("empty");
    let f = t.file("e.csv", b"");
    assert!(err(&f, &LoadOptions::default()).contains("empty"));
    let f = t.file("h.csv", b"a,b,c\n");
    let e = err(&f, &LoadOptions::default());
    assert!(e.contains("no data rows") || e.contains("empty"), "{e}");
}

#[test]
fn nan_and_inf_fail_unless_dropped() {
    let t = TempDir::new("nan");
    let f = t.file("n.csv", b"1,2\nNaN,3\n4,inf\n5,6\n");
    let e = err(&f, &LoadOptions::default());
    assert!(
        e.contains("NaN or infinite") && e.contains("sample 1") && e.contains("--drop-nonfinite"),
        "{e}"
    );
    let ds = data::load(
        &f,
        &LoadOptions {
            drop_nonfinite: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(ds.n, 2);
    assert_eq!(ds.x, vec![1.0, 2.0, 5.0, 6.0]);
}

#[test]
fn uci_whitespace_file_with_name_column() {
    let t = TempDir::new("ws");
    let f = t.file("y.data", b"ADT1  0.5 0.6 MIT\nADT2  0.4 0.7 NUC\n");
    let opts = LoadOptions {
        skip_columns: vec![0],
        ..Default::default()
    };
    let ds = data::load(&f, &opts).unwrap();
    assert_eq!((ds.n, ds.d), (2, 2));
    assert_eq!(ds.label_names, vec!["MIT", "NUC"]);
}

#[test]
fn npy_dtypes_and_labels_files() {
    for (f, first) in [
        ("dense_f64.npy", 0.5f32),
        ("dense_f32.npy", 0.5),
        ("dense_u8.npy", 10.0),
        ("dense_i64.npy", 1.0),
    ] {
        let ds = load(&fixture(f)).unwrap();
        assert_eq!((ds.n, ds.d), (4, 3), "{f}");
        assert_eq!(ds.x[1], first, "{f}");
    }
    let ds = load(&fixture("images_u8.npy")).unwrap();
    assert_eq!(ds.image_shape, Some([2, 2, 1]));
    let opts = LoadOptions {
        labels: Some(fixture("labels4.npy").into()),
        ..Default::default()
    };
    let ds = data::load(&fixture("dense_f32.npy"), &opts).unwrap();
    assert_eq!(ds.labels.unwrap(), vec![0, 1, 1, 0]);
    let opts = LoadOptions {
        labels: Some(fixture("labels3.npy").into()),
        ..Default::default()
    };
    let e = err(&fixture("dense_f32.npy"), &opts);
    assert!(
        e.contains("labels3.npy") && e.contains("3 labels") && e.contains("4 samples"),
        "{e}"
    );
}

#[test]
fn npz_dense_and_scipy_csr() {
    let ds = load(&fixture("dense.npz")).unwrap();
    assert_eq!((ds.n, ds.d), (4, 3));
    assert_eq!(ds.labels.unwrap(), vec![0, 0, 1, 1]);
    for f in ["csr.npz", "csr64.npz"] {
        let ds = load(&fixture(f)).unwrap();
        assert_eq!((ds.n, ds.d), (3, 4), "{f}");
        assert_eq!(
            ds.x,
            vec![0.0, 1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.0, 0.0, 0.0],
            "{f}"
        );
    }
}

#[test]
fn idx_folder_file_and_bad_idx() {
    let ds = load(&sample("mnist10k")).unwrap();
    assert_eq!((ds.n, ds.d), (10_000, 784));
    assert_eq!(ds.image_shape, Some([28, 28, 1]));
    assert_eq!(ds.n_classes(), 10);
    let ds = load(&sample("mnist10k/mnist10k-images-idx3-ubyte.gz")).unwrap();
    assert_eq!(ds.n_classes(), 10, "sibling labels file found");

    let t = TempDir::new("idx");
    // wrong magic
    let f = t.file(
        "bad-images-idx3-ubyte",
        &[0, 0, 9, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 7],
    );
    let e = err(&f, &LoadOptions::default());
    assert!(e.contains("wrong IDX magic"), "{e}");
    // truncated gzip
    let full = std::fs::read(sample("mnist10k/mnist10k-labels-idx1-ubyte.gz")).unwrap();
    let f = t.file("trunc-images-idx3-ubyte.gz", &full[..full.len() / 2]);
    let e = err(&f, &LoadOptions::default());
    assert!(e.contains("trunc-images") && e.contains("truncated"), "{e}");
    // body shorter than the header says
    let f = t.file(
        "short-images-idx3-ubyte",
        &[0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3],
    );
    let e = err(&f, &LoadOptions::default());
    assert!(e.contains("IDX body has 3 bytes"), "{e}");
}

#[test]
fn sklearn_bundled_csvs() {
    let ds = load(&sample("iris/iris.csv")).unwrap();
    assert_eq!((ds.n, ds.d), (150, 4));
    assert_eq!(ds.label_names, vec!["setosa", "versicolor", "virginica"]);
    let ds = load(&sample("digits")).unwrap();
    assert_eq!((ds.n, ds.d), (1797, 64));
    assert_eq!(ds.image_shape, Some([8, 8, 1]));
    assert_eq!(ds.n_classes(), 10);
    // wine: the file and the copy compiled into the binary (the UCI experiment's) are the same data
    let ds = load(&sample("wine/wine_data.csv")).unwrap();
    assert_eq!((ds.n, ds.d), (178, 13));
    assert_eq!(ds.label_names, vec!["class_0", "class_1", "class_2"]);
    let mut counts = [0; 3];
    for &l in ds.labels.as_ref().unwrap() {
        counts[l as usize] += 1;
    }
    assert_eq!(counts, [59, 71, 48], "UCI wine's cultivar counts");
    assert_eq!(&ds.x[..3], &[14.23, 1.71, 2.43]);
    let embedded = data::embedded_wine().unwrap();
    assert_eq!(embedded.name, "wine");
    assert_eq!((embedded.x, embedded.labels), (ds.x, ds.labels));
}

#[test]
fn generators_are_seeded() {
    let a = load("builtin:gaussians5").unwrap();
    let b = load("builtin:gaussians5").unwrap();
    assert_eq!(a.x, b.x);
    assert_eq!((a.n, a.d, a.n_classes()), (2000, 2, 5));
    let c = data::load(
        "builtin:gaussians5",
        &LoadOptions {
            seed: 1,
            ..Default::default()
        },
    )
    .unwrap();
    assert_ne!(a.x, c.x);
    for g in [
        "moons",
        "circles",
        "blobs",
        "varied",
        "aniso",
        "no-structure",
    ] {
        let ds = load(&format!("builtin:{g}")).unwrap();
        assert_eq!(ds.d, 2, "{g}");
        // standardised
        let mean: f32 = (0..ds.n).map(|i| ds.x[i * 2]).sum::<f32>() / ds.n as f32;
        assert!(mean.abs() < 1e-3, "{g}");
    }
    let e = err("builtin:nope", &LoadOptions::default());
    assert!(e.contains("unknown generator"), "{e}");
}

#[test]
fn missing_path_is_a_clear_error() {
    let e = err("/nonexistent/data.csv", &LoadOptions::default());
    assert!(
        e.contains("/nonexistent/data.csv") && e.contains("no such file"),
        "{e}"
    );
    let _ = Path::new("x");
}
