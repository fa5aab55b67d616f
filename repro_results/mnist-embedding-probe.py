"""The MNIST AE-CM's embedding, read from an `aecm train` checkpoint (sixteenth/seventeenth session probe).

Usage: python3 mnist-embedding-probe.py OUT/checkpoint-seed-S.safetensors [MNIST_DIR] [PAIRS]
(needs numpy and scikit-learn; MNIST_DIR defaults to ../shared/data/mnist, the four idx .gz files;
PAIRS the digit pairs to probe, e.g. 4-9,5-8; default 4-9,3-5,7-9,1-7,3-8).

Recomputes the embedding z of all 70,000 images from the checkpoint's parameters (encoder
784-500-500-2000-10, LeakyReLU 0.2; parameter order of `Arch::param_shapes`), the CM's clusters
argmax softmax(z W_enc + b_enc), and compares them with k-means and a full-covariance Gaussian
mixture on the same z, and, per pair of digits, a linear probe (5-fold logistic regression), 2-means,
a 2-component GMM and where the pair's mean difference lies among the pair's principal axes.
"""
import gzip, json, struct, sys
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.cluster import KMeans
from sklearn.mixture import GaussianMixture
from sklearn.metrics import adjusted_rand_score as ari
from sklearn.decomposition import PCA

def load_st(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop('__metadata__', {})
    out = {}
    for k, v in h.items():
        s, e = v['data_offsets']
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.float32).reshape(v['shape'])
    return out, meta

def idx(path):
    b = gzip.open(path).read()
    dims = b[3]
    shape = struct.unpack('>' + 'I' * dims, b[4:4 + 4 * dims])
    return np.frombuffer(b[4 + 4 * dims:], dtype=np.uint8).reshape(shape)

d = sys.argv[2] if len(sys.argv) > 2 else '../shared/data/mnist/'
d = d.rstrip('/') + '/'
x = np.concatenate([idx(d + 'train-images-idx3-ubyte.gz'), idx(d + 't10k-images-idx3-ubyte.gz')]).reshape(70000, -1).astype(np.float32) / 255
y = np.concatenate([idx(d + 'train-labels-idx1-ubyte.gz'), idx(d + 't10k-labels-idx1-ubyte.gz')]).astype(int)
p, meta = load_st(sys.argv[1])
st = json.loads(meta.get('aecm.state', '{}')) if meta else {}
print('phase', st.get('phase'), 'epoch_in_phase', st.get('epoch_in_phase'))
P = [p['param.%02d' % i] for i in range(len([k for k in p if k.startswith('param.')]))]
h = x
for l in range(4):
    h = h @ P[2 * l] + P[2 * l + 1]
    if l < 3:
        h = np.where(h > 0, h, 0.2 * h)
z = h
logits = z @ P[16] + P[17]
g = np.exp(logits - logits.max(1, keepdims=True)); g /= g.sum(1, keepdims=True)
a = g.argmax(1)
print('CM ARI on all %.1f' % (100 * ari(y, a)))
km = KMeans(10, n_init=10, random_state=0).fit(z)
print('k-means(10, 10 starts) ARI %.1f' % (100 * ari(y, km.labels_)))
gm = GaussianMixture(10, covariance_type='full', n_init=2, random_state=0).fit(z)
gp = gm.predict(z)
print('GMM(10, full, 2 starts) ARI %.1f' % (100 * ari(y, gp)))
def counts(lab):
    C = np.zeros((10, 10), int)
    np.add.at(C, (lab, y), 1)
    return C
for name, lab in [('CM', a), ('k-means', km.labels_), ('GMM', gp)]:
    C = counts(lab)
    top = lambda c: ', '.join('%d%% in %d' % (round(100 * C[k, c] / C[:, c].sum()), k) for k in np.argsort(-C[:, c])[:2])
    w = min(range(10), key=lambda c: C[:, c].max() / C[:, c].sum())
    print('  %s: 4s %s; 9s %s; the class least in one cluster: %d (%s)' % (name, top(4), top(9), w, top(w)))
C = counts(a)
print('  CM clusters x classes (rows: clusters 0-9; columns: digits 0-9):')
for k in range(10):
    print('   ', ' '.join('%5d' % v for v in C[k]))
U = P[18] + P[19]
print('centroid norms', np.round(np.linalg.norm(U, axis=1), 2))
pairs = sys.argv[3] if len(sys.argv) > 3 else '4-9,3-5,7-9,1-7,3-8'
for (c1, c2) in [tuple(int(c) for c in q.split('-')) for q in pairs.split(',')]:
    m = (y == c1) | (y == c2)
    zz, yy, xx = z[m], (y[m] == c1).astype(int), x[m]
    lr = cross_val_score(LogisticRegression(max_iter=2000), zz, yy, cv=5).mean()
    km2 = KMeans(2, n_init=10, random_state=0).fit(zz)
    gm2 = GaussianMixture(2, covariance_type='full', n_init=3, random_state=0).fit(zz)
    kmx = KMeans(2, n_init=10, random_state=0).fit(xx)
    pc = PCA(3).fit(zz)
    # how much of the class difference lies along the top principal axes
    diff = zz[yy == 1].mean(0) - zz[yy == 0].mean(0)
    cos = np.abs(pc.components_ @ diff) / np.linalg.norm(diff)
    print('%d vs %d: linear probe acc %.3f | 2-means ARI %.1f (pixels %.1f) | 2-GMM ARI %.1f | '
          'PCA var ratio %s | |cos(mean diff, PC1..3)| %s | CM clusters used %s' % (
        c1, c2, lr, 100 * ari(yy, km2.labels_), 100 * ari(yy, kmx.labels_), 100 * ari(yy, gm2.predict(zz)),
        np.round(pc.explained_variance_ratio_, 2), np.round(cos, 2),
        np.bincount(a[m], minlength=10)))
