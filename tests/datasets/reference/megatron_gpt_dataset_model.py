"""A model of Megatron-LM core_v0.12.0's GPT dataset machinery, run on NumPy.

It re-states, in plain Python, what megatron/core/datasets/{gpt_dataset.py, helpers.cpp,
helpers.py, blended_dataset.py, blended_megatron_dataset_builder.py,
blended_megatron_dataset_config.py, megatron_dataset.py, utils.py} and
megatron/legacy/data/data_samplers.py compute, with NumPy doing the random numbers exactly as
Megatron calls it (numpy.random.RandomState(seed) for the document and shuffle indices,
numpy.random.default_rng(0) for the mock sequence lengths). generate_reference_vectors.py runs
it and writes the expected arrays the C++ tests compare against.

Only NumPy and the standard library are needed (no torch, no Megatron checkout).
"""

import hashlib
import json
import math
import re
from collections import OrderedDict

import numpy

PAD_TOKEN_ID = -1  # gpt_dataset._PAD_TOKEN_ID
SPLIT_NAMES = ["train", "valid", "test"]


# --------------------------------------------------------------------------------------------
# Splits and weights (blended_megatron_dataset_config.py, utils.py)


def normalize(weights):
    w = numpy.array(weights, dtype=numpy.float64)
    return (w / numpy.sum(w)).tolist()


def parse_and_normalize_split(split):
    values = [float(v) for v in re.findall(r"[.0-9]+", split)]
    values = values + [0.0] * (3 - len(values))
    assert len(values) == 3 and all(v >= 0.0 for v in values)
    return normalize(values)


def convert_split_vector_to_split_matrix(vector):
    # Cumulative sums left to right, starting from the int 0.
    expansion = [0]
    for v in vector:
        expansion.append(expansion[-1] + v)
    matrix = []
    for lo, hi in zip(expansion[:-1], expansion[1:]):
        matrix.append(None if hi <= lo else (lo, hi))
    return matrix


def split_indices(bookend, num_elements):
    beg = int(round(bookend[0] * float(num_elements)))
    end = int(round(bookend[1] * float(num_elements)))
    return numpy.arange(beg, end, dtype=numpy.int32)


def get_blend_from_list(blend):
    if len(blend) % 2 == 1:
        return [p.strip() for p in blend], None
    try:
        weights = [float(blend[i]) for i in range(0, len(blend), 2)]
    except ValueError:
        return [p.strip() for p in blend], None
    return [blend[i].strip() for i in range(1, len(blend), 2)], weights


def get_train_valid_test_num_samples(train_iters, train_samples, eval_interval, eval_iters, gbs):
    train = train_samples if train_samples else train_iters * gbs
    if train_samples:
        train_iters = train_samples // gbs
    return train, (train_iters // eval_interval + 1) * eval_iters * gbs, eval_iters * gbs


# --------------------------------------------------------------------------------------------
# Low-level datasets


class SyntheticLowLevelDataset:
    """Sequence i has lengths[i] tokens: token k is 1 + (i * 7919 + k * 31) % 997, the last one
    is the EOD. The C++ tests build the same data (tests/datasets/test_datasets.h)."""

    def __init__(self, lengths, eod, path_prefix):
        self.sequence_lengths = numpy.array(lengths, dtype=numpy.int32)
        self.eod = eod
        self.path_prefix = path_prefix

    def get(self, idx, offset=0, length=None):
        n = int(self.sequence_lengths[idx])
        if length is None:
            length = n - offset
        k = numpy.arange(n, dtype=numpy.int64)
        seq = 1 + (idx * 7919 + k * 31) % 997
        seq[n - 1] = self.eod
        return seq[offset : offset + length]


class MockLowLevelDataset:
    """MockGPTLowLevelDataset: 100000 sequences, lengths from default_rng(0)."""

    seed = 0
    size = 100000
    max_sequence_length = 4096

    def __init__(self, eod):
        rng = numpy.random.default_rng(seed=self.seed)
        self.sequence_lengths = rng.integers(
            low=1, high=self.max_sequence_length, size=self.size, dtype=numpy.int32
        )
        self.eod = eod
        self.path_prefix = None

    def get(self, idx, offset=0, length=None):
        n = int(self.sequence_lengths[idx])
        if length is None:
            length = n - offset
        seq = numpy.concatenate([numpy.arange(n - 1) + 1, [self.eod]]).astype(numpy.int64)
        return seq[offset : offset + length]


# --------------------------------------------------------------------------------------------
# GPTDataset indices (gpt_dataset.py, helpers.cpp, helpers.py)


def build_document_index(documents, num_epochs, rs, separate_final_epoch):
    if not separate_final_epoch or num_epochs == 1:
        index = numpy.tile(numpy.asarray(documents, dtype=numpy.int64), num_epochs).astype(numpy.int32)
        rs.shuffle(index)
        return index
    first = build_document_index(documents, num_epochs - 1, rs, False)
    last = build_document_index(documents, 1, rs, False)
    return numpy.concatenate((first, last))


def build_sample_idx(sizes, document_index, seq_length, num_epochs, tokens_per_epoch,
                     drop_last_partial_sequence, extra):
    total = num_epochs * tokens_per_epoch - extra
    if drop_last_partial_sequence:
        num_samples = total // seq_length
    else:
        # float32 arithmetic, as the C++ helper's ceil(float(...) / seq_length)
        num_samples = int(math.ceil(numpy.float32(total) / numpy.float32(seq_length)))
    rows = [(0, 0)]
    pos, offset = 0, 0
    while len(rows) <= num_samples:
        remaining = seq_length + extra
        while remaining != 0:
            doc_len = int(sizes[document_index[pos]]) - offset
            remaining -= doc_len
            if remaining <= 0:
                offset += remaining + doc_len - extra
                remaining = 0
            else:
                if pos == len(document_index) - 1:
                    assert len(rows) == num_samples
                    offset = int(sizes[document_index[pos]]) - extra
                    break
                pos += 1
                offset = 0
        rows.append((pos, offset))
    dtype = numpy.int32
    if max(len(document_index), int(numpy.max(sizes))) > numpy.iinfo(numpy.int32).max:
        dtype = numpy.int64
    return numpy.array(rows, dtype=dtype).reshape(-1, 2)


def build_shuffle_index(num_samples, total_size, rs):
    dtype = numpy.uint32
    if total_size >= numpy.iinfo(numpy.uint32).max - 1:
        dtype = numpy.int64
    first = numpy.arange(0, num_samples, dtype=dtype)
    rs.shuffle(first)
    if num_samples == total_size:
        return first
    last = numpy.arange(num_samples, total_size, dtype=dtype)
    rs.shuffle(last)
    return numpy.concatenate((first, last))


class Config:
    def __init__(self, seed=1234, seq_length=16, split=None, split_matrix=None, tokenizer=None,
                 eod=0, pad=PAD_TOKEN_ID, reset_position_ids=False, reset_attention_mask=False,
                 eod_mask_loss=False, drop_last_partial_validation_sequence=True,
                 add_extra_token_to_sequence=True, mock=False, surplus=0.005):
        self.random_seed = seed
        self.sequence_length = seq_length
        self.split = split
        self.split_matrix = split_matrix
        self.tokenizer = tokenizer
        self.eod = eod
        self.pad = pad
        self.reset_position_ids = reset_position_ids
        self.reset_attention_mask = reset_attention_mask
        self.eod_mask_loss = eod_mask_loss
        self.drop_last_partial_validation_sequence = drop_last_partial_validation_sequence
        self.add_extra_token_to_sequence = add_extra_token_to_sequence
        self.mock = mock
        self.surplus = surplus


class Tokenizer:
    """A stand-in with MegatronTokenizer.unique_identifiers."""

    def __init__(self, class_name, paths, options=()):
        self.unique_identifiers = OrderedDict()
        self.unique_identifiers["class"] = class_name
        self.unique_identifiers["tokenizer_path"] = list(paths)
        for k, v in options:
            self.unique_identifiers[k] = str(v)


def describe(identifiers):
    text = json.dumps(identifiers, indent=4, default=lambda obj: obj.unique_identifiers)
    return text, hashlib.md5(text.encode("utf-8")).hexdigest()


class GPTDatasetModel:
    def __init__(self, low, dataset_path, indices, num_samples, split_index, config):
        self.low = low
        self.indices = indices
        self.num_samples = num_samples
        self.split_index = split_index
        self.config = config
        self.extra = 1 if config.add_extra_token_to_sequence else 0
        ids = OrderedDict()
        ids["class"] = "MockGPTDataset" if config.mock else "GPTDataset"
        ids["dataset_path"] = dataset_path
        ids["num_samples"] = num_samples
        ids["index_split"] = SPLIT_NAMES[split_index]
        ids["random_seed"] = config.random_seed
        ids["sequence_length"] = config.sequence_length
        ids["split"] = config.split
        ids["split_matrix"] = config.split_matrix
        ids["tokenizer"] = config.tokenizer
        self.unique_identifiers = ids
        self.unique_description, self.unique_description_hash = describe(ids)
        self._build()

    def _build(self):
        c, x, s = self.config, self.extra, self.config.sequence_length
        sizes = self.low.sequence_lengths
        tokens_per_epoch = int(numpy.sum(sizes[self.indices]))
        num_epochs = 1
        if self.num_samples is not None:
            while num_epochs * tokens_per_epoch < self.num_samples * s + x:
                num_epochs += 1
        separate = False
        sans_final = None
        if num_epochs > 1:
            sans_final = ((num_epochs - 1) * tokens_per_epoch - x) // s
            from_final = self.num_samples - sans_final
            per_epoch = (tokens_per_epoch - x) // s
            assert 0 <= from_final <= per_epoch + 1
            separate = from_final < int(0.80 * per_epoch)
        self.num_epochs, self.separate_final_epoch = num_epochs, separate
        rs = numpy.random.RandomState(c.random_seed)
        self.document_index = build_document_index(self.indices, num_epochs, rs, separate)
        drop_last = c.drop_last_partial_validation_sequence if self.split_index == 1 else True
        self.sample_index = build_sample_idx(sizes, self.document_index, s, num_epochs,
                                             tokens_per_epoch, drop_last, x)
        total = self.sample_index.shape[0] - 1
        self.shuffle_index = build_shuffle_index(sans_final if separate else total, total, rs)

    def __len__(self):
        return self.sample_index.shape[0] - 1

    def text(self, idx):
        """_query_document_sample_shuffle_indices: seq_length + extra ids, padded."""
        x = self.extra
        j = self.shuffle_index[idx]
        d0, o0 = (int(v) for v in self.sample_index[j])
        d1, o1 = (int(v) for v in self.sample_index[j + 1])
        parts = []
        if d0 == d1:
            parts.append(self.low.get(self.document_index[d0], o0, o1 - o0 + x))
        else:
            for i in range(d0, d1 + 1):
                offset = o0 if i == d0 else 0
                length = None if i < d1 else o1 + x
                parts.append(self.low.get(self.document_index[i], offset, length))
        text = numpy.concatenate(parts).astype(numpy.int64)
        target = self.config.sequence_length + x
        if len(text) < target:
            text = numpy.concatenate([text, numpy.full(target - len(text), self.config.pad)])
        return text

    def getitem(self, idx):
        """__getitem__ with the dense attention mask turned into doc_start (see ltor_masks)."""
        c = self.config
        text = self.text(idx)
        if self.extra:
            tokens, labels = text[:-1].copy(), text[1:].copy()
        else:
            tokens = text.copy()
            labels = numpy.roll(text, -1)
            labels[-1] = c.pad
        mask, loss_mask, position_ids = ltor_masks_and_position_ids(
            tokens, c.eod, c.reset_position_ids, c.reset_attention_mask, c.eod_mask_loss)
        loss_mask[labels == c.pad] = 0.0
        tokens[tokens == c.pad] = 0
        labels[labels == c.pad] = 0
        return tokens, labels, loss_mask, position_ids, doc_start_from_mask(mask)


def ltor_masks_and_position_ids(data, eod, reset_position_ids, reset_attention_mask,
                                eod_mask_loss):
    """_get_ltor_masks_and_position_ids on NumPy. Returns the dense [s, s] mask with
    True = may attend (Megatron returns its negation), the loss mask and positions."""
    s = len(data)
    mask = numpy.tril(numpy.ones((s, s), dtype=bool))
    loss_mask = numpy.ones(s, dtype=numpy.float32)
    if eod_mask_loss:
        loss_mask[data == eod] = 0.0
    position_ids = numpy.arange(s, dtype=numpy.int64)
    if reset_position_ids or reset_attention_mask:
        eod_index = numpy.nonzero(data == eod)[0]
        prev = 0
        for i in eod_index:
            if reset_attention_mask:
                mask[i + 1 :, : i + 1] = False
            if reset_position_ids:
                position_ids[i + 1 :] -= i + 1 - prev
                prev = i + 1
    return mask, loss_mask, position_ids


def doc_start_from_mask(mask):
    """Row t of a causal block mask is visible exactly on [doc_start[t], t]; checks that."""
    s = mask.shape[0]
    start = numpy.zeros(s, dtype=numpy.int64)
    for t in range(s):
        visible = numpy.nonzero(mask[t])[0]
        start[t] = visible[0]
        assert visible[-1] == t and len(visible) == t - start[t] + 1
    return start


def actual_seq_len(tokens, eod, reset_attention_mask):
    s = len(tokens)
    if not reset_attention_mask:
        return [s]
    ends = [int(i) + 1 for i in numpy.nonzero(tokens == eod)[0]]
    if not ends or ends[-1] != s:
        ends.append(s)
    return ends


# --------------------------------------------------------------------------------------------
# Blending (helpers.cpp, blended_dataset.py, blended_megatron_dataset_builder.py)


def build_blending_indices(weights, size):
    counts = [0] * len(weights)
    dataset_index = numpy.zeros(size, dtype=numpy.int16)
    sample_index = numpy.zeros(size, dtype=numpy.int64)
    for i in range(size):
        scale = max(float(i), 1.0)
        errors = [w * scale - c for w, c in zip(weights, counts)]
        d = max(range(len(weights)), key=lambda k: (errors[k], -k))  # first argmax
        dataset_index[i] = d
        sample_index[i] = counts[d]
        counts[d] += 1
    return dataset_index, sample_index


def build_exhaustive_blending_indices(sizes):
    total = int(sum(sizes))
    weights = [s / float(total) for s in sizes]
    counts = [0] * len(sizes)
    unspent = [d for d in range(len(sizes))]
    dataset_index = numpy.zeros(total, dtype=numpy.int16)
    sample_index = numpy.zeros(total, dtype=numpy.int64)
    i = 0
    while unspent:
        scale = max(float(i), 1.0)
        best, best_err = None, None
        for d in unspent:
            err = weights[d] * scale - counts[d]
            if best is None or err > best_err:
                best, best_err = d, err
        dataset_index[i] = best
        sample_index[i] = counts[best]
        counts[best] += 1
        if counts[best] == sizes[best]:
            unspent.remove(best)
        i += 1
    return dataset_index, sample_index


def size_per_split_per_dataset(weights, targets, surplus=0.0):
    return [[int(math.ceil(math.ceil(t * w) * (1 + surplus))) for t in targets] for w in weights]


class BlendedDatasetModel:
    def __init__(self, datasets, weights, size):
        if size is not None:
            weights = normalize(weights)
        self.datasets, self.weights, self.size = datasets, weights, size
        ids = OrderedDict()
        ids["class"] = "BlendedDataset"
        ids["datasets"] = [d.unique_identifiers for d in datasets]
        ids["split"] = SPLIT_NAMES[datasets[0].split_index]
        ids["weights"] = weights
        ids["size"] = size
        self.unique_description, self.unique_description_hash = describe(ids)
        if size is not None:
            self.dataset_index, self.dataset_sample_index = build_blending_indices(weights, size)
        else:
            self.dataset_index, self.dataset_sample_index = build_exhaustive_blending_indices(weights)

    def __len__(self):
        return len(self.dataset_index)

    def text(self, idx):
        return self.datasets[self.dataset_index[idx]].text(self.dataset_sample_index[idx])


def build_blend(lows, prefixes, weights, config, sizes):
    """_build_blended_dataset_splits for one blend with several prefixes (all splits from
    config.split_matrix)."""
    if weights is not None:
        weights = normalize(weights)
        target = size_per_split_per_dataset(weights, sizes)
        buffer = size_per_split_per_dataset(weights, sizes, config.surplus)
    else:
        buffer = [[None] * 3 for _ in prefixes]
    mids = [[None] * len(prefixes) for _ in range(3)]
    for p, (low, prefix) in enumerate(zip(lows, prefixes)):
        for i in range(3):
            if config.split_matrix[i] is not None:
                idx = split_indices(config.split_matrix[i], len(low.sequence_lengths))
                mids[i][p] = GPTDatasetModel(low, prefix, idx, buffer[p][i], i, config)
    out = [None] * 3
    for i in range(3):
        if config.split_matrix[i] is None:
            continue
        if weights is not None:
            out[i] = BlendedDatasetModel(mids[i], weights, sum(t[i] for t in target))
        else:
            lengths = [len(d) for d in mids[i]]
            size = None if sizes[i] is None else min(sizes[i], sum(lengths))
            out[i] = BlendedDatasetModel(mids[i], lengths, size)
    return out


# --------------------------------------------------------------------------------------------
# Sampler (megatron/legacy/data/data_samplers.py: MegatronPretrainingSampler)


def pretraining_sampler(total, consumed, mbs, rank, dp, drop_last=True):
    batch = []
    for idx in range(consumed, total):
        batch.append(idx)
        if len(batch) == mbs * dp:
            yield batch[rank * mbs : (rank + 1) * mbs]
            batch = []
    if batch and not drop_last:
        yield batch[rank * mbs : (rank + 1) * mbs]
