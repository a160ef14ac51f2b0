package cli

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/fileio"
	"github.com/probformer/probformer/layers"
)

// torchModule is the PyTorch module a --format pytorch export loads into:
// written next to the export and printed by --print-module.
//
//go:embed probformer_torch.py
var torchModule string

// Names of what a --format pytorch export writes.
const (
	torchModuleFile = "probformer_torch.py"
	torchStateFile  = "model.safetensors" // in a directory given as --out
)

// torchOutputs returns where a --format pytorch export writes its state
// dict and its module: --out ending in .safetensors is the state dict's
// file, the module next to it; any other --out but a .pt/.pth file is a
// directory that receives both.
func torchOutputs(out string) (state, module string, err error) {
	switch strings.ToLower(filepath.Ext(out)) {
	case ".safetensors":
		return out, filepath.Join(filepath.Dir(out), torchModuleFile), os.MkdirAll(filepath.Dir(out), 0o755)
	case ".pt", ".pth", ".bin":
		return "", "", fmt.Errorf("--out %s: --format pytorch writes the state_dict as safetensors (no pickle); give a file ending in .safetensors or a directory", out)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", "", err
	}
	return filepath.Join(out, torchStateFile), filepath.Join(out, torchModuleFile), nil
}

// torchConfig is the keyword arguments of probformer_torch.ProbformerSeq2Seq,
// the export's pytorch_config metadata.
type torchConfig struct {
	DModel       int  `json:"d_model"`
	Heads        int  `json:"heads"`
	FF           int  `json:"ff"`
	EncLayers    int  `json:"enc_layers"`
	DecLayers    int  `json:"dec_layers"`
	SrcVocab     int  `json:"src_vocab"`
	TgtVocab     int  `json:"tgt_vocab"`
	MaxLen       int  `json:"max_len"`        // positions, and greedy decoding's limit (<eos> included)
	MaxSourceLen int  `json:"max_source_len"` // data.max_len: longer sources are cut
	PreLN        bool `json:"pre_ln"`
	FinalNorm    bool `json:"final_norm"`
	TieOutput    bool `json:"tie_output"`
}

// torchSetConfig is the keyword arguments of
// probformer_torch.ProbformerSetTransformer, the pytorch_config metadata
// of a maxnorm export.
type torchSetConfig struct {
	DimIn      int    `json:"dim_in"`
	Dim        int    `json:"dim"`
	Heads      int    `json:"heads"`
	DimOut     int    `json:"dim_out"`
	Encoder    string `json:"encoder"` // "sab" or "isab"
	Blocks     int    `json:"blocks"`
	Inducing   int    `json:"inducing"`
	Seeds      int    `json:"seeds"`
	DecoderSAB bool   `json:"decoder_sab"`
	LayerNorm  bool   `json:"layer_norm"`
}

// torchSupported reports why a checkpoint has no PyTorch twin, or nil.
func torchSupported(cfg *configs.Config, file string) error {
	var (
		k string
		a layers.AttentionConfig
	)
	switch m := cfg.Model.(type) {
	case *tasks.TransformerModel:
		k, a = m.Kind, m.Attention
	case *tasks.MaxNormModel:
		k, a = m.Kind, m.Attention
	}
	switch cfg.Task {
	case "seq2seq":
		if k != "" && k != "transformer" {
			return fmt.Errorf("checkpoint %s: model.kind %q; --format pytorch exports the transformer only", file, k)
		}
	case "maxnorm":
		if k != "" && k != "set-transformer" {
			return fmt.Errorf("checkpoint %s: model.kind %q; --format pytorch exports the set-transformer only", file, k)
		}
	default:
		return fmt.Errorf("checkpoint %s: a %s model; --format pytorch exports seq2seq (Transformer) and maxnorm (Set Transformer) checkpoints only (use --format safetensors)", file, cfg.Task)
	}
	if (a.Kind != "" && a.Kind != "softmax") || (a.Score != "" && a.Score != layers.ScoreScaledDot) || a.RelativePositions != 0 {
		return fmt.Errorf("checkpoint %s: attention kind %q, score %q, relative_positions %d: --format pytorch exports softmax scaled_dot attention without relative positions only (use --format safetensors)",
			file, a.Kind, a.Score, a.RelativePositions)
	}
	return nil
}

// paramGetter looks parameters up by name and shape, records which were
// used and collects the errors.
type paramGetter struct {
	byName map[string]ckpt.Tensor
	used   map[string]bool
	errs   []string
}

func newParamGetter(params []ckpt.Tensor) *paramGetter {
	g := &paramGetter{byName: map[string]ckpt.Tensor{}, used: map[string]bool{}}
	for _, p := range params {
		g.byName[p.Name] = p
	}
	return g
}

func (g *paramGetter) get(name string, shape ...int) ckpt.Tensor {
	p, ok := g.byName[name]
	if !ok {
		g.errs = append(g.errs, fmt.Sprintf("no parameter %s", name))
		return ckpt.Tensor{Name: name, Shape: shape, Values: make([]float64, prod(shape))}
	}
	if fmt.Sprint(p.Shape) != fmt.Sprint(shape) {
		g.errs = append(g.errs, fmt.Sprintf("%s has shape %v, want %v", name, p.Shape, shape))
		return ckpt.Tensor{Name: name, Shape: shape, Values: make([]float64, prod(shape))}
	}
	g.used[name] = true
	return p
}

// torchSetStateDict maps a maxnorm checkpoint's layers.SetTransformer
// parameters onto the state_dict of
// probformer_torch.ProbformerSetTransformer: dense weights [in, out]
// become nn.Linear's [out, in], LayerNorm g, b its weight, bias; the
// encoder keeps its names (enc.<i>.mab.q → enc.<i>.mab.q.weight, .bias;
// enc.<i>.inducing, enc.<i>.mab0, enc.<i>.mab1), dec.pma becomes pma,
// dec.sab sab, head head. Every parameter must be used once.
func torchSetStateDict(cfg *configs.Config, params []ckpt.Tensor) (map[string]ckpt.Tensor, torchSetConfig, error) {
	m, okM := cfg.Model.(*tasks.MaxNormModel)
	data, okD := cfg.Data.(*tasks.MaxNormData)
	if !okM || !okD {
		return nil, torchSetConfig{}, fmt.Errorf("config: not task maxnorm's sections (%T, %T)", cfg.Data, cfg.Model)
	}
	d := m.Dim
	tc := torchSetConfig{DimIn: data.Dim, Dim: d, Heads: m.Heads, DimOut: data.Dim, Encoder: m.Encoder,
		Blocks: m.Blocks, Inducing: m.Inducing, Seeds: m.Seeds, DecoderSAB: m.DecoderSAB, LayerNorm: m.LayerNorm}
	if tc.Encoder != "sab" && tc.Encoder != "isab" {
		return nil, tc, fmt.Errorf("model.encoder %q: want sab or isab", tc.Encoder)
	}
	g := newParamGetter(params)
	out := map[string]ckpt.Tensor{}
	put := func(name string, t ckpt.Tensor) {
		out[name] = ckpt.Tensor{Name: name, Shape: t.Shape, Values: t.Values}
	}
	linear := func(to, from string, din, dout int) {
		put(to+".weight", transpose(g.get(from+".w", din, dout)))
		put(to+".bias", g.get(from+".b", dout))
	}
	// mab maps layers.MAB name (queries of width dq, keys dk).
	mab := func(to, from string, dq, dk int) {
		linear(to+".q", from+".q", dq, d)
		linear(to+".k", from+".k", dk, d)
		linear(to+".v", from+".v", dk, d)
		linear(to+".o", from+".o", d, d)
		if m.LayerNorm {
			for _, ln := range []string{".ln0", ".ln1"} {
				put(to+ln+".weight", g.get(from+ln+".g", d))
				put(to+ln+".bias", g.get(from+ln+".b", d))
			}
		}
	}
	width := tc.DimIn
	for i := range m.Blocks {
		name := fmt.Sprintf("enc.%d", i)
		if m.Encoder == "isab" {
			put(name+".inducing", g.get(name+".inducing", m.Inducing, d))
			mab(name+".mab0", name+".mab0", d, width)
			mab(name+".mab1", name+".mab1", width, d)
		} else {
			mab(name+".mab", name+".mab", width, width)
		}
		width = d
	}
	put("pma.seeds", g.get("dec.pma.seeds", m.Seeds, d))
	mab("pma.mab", "dec.pma.mab", d, width)
	if m.DecoderSAB {
		mab("sab.mab", "dec.sab.mab", d, d)
	}
	linear("head", "head", d, tc.DimOut)
	for _, p := range params {
		if !g.used[p.Name] {
			g.errs = append(g.errs, fmt.Sprintf("parameter %s has no place in ProbformerSetTransformer", p.Name))
		}
	}
	if len(g.errs) > 0 {
		return nil, tc, fmt.Errorf("%s", strings.Join(g.errs, "; "))
	}
	return out, tc, nil
}

// torchStateDict maps a seq2seq checkpoint's parameters onto the
// state_dict of probformer_torch.ProbformerSeq2Seq: dense weights
// [in, out] become nn.Linear's [out, in], the q, k, v projections one
// in_proj_weight [3d, d], LayerNorm g, b its weight, bias, and the
// sinusoidal table the buffer pos. Every parameter must be used once.
func torchStateDict(cfg *configs.Config, params []ckpt.Tensor) (map[string]ckpt.Tensor, torchConfig, error) {
	byName := map[string]ckpt.Tensor{}
	for _, p := range params {
		byName[p.Name] = p
	}
	used := map[string]bool{}
	var errs []string
	get := func(name string, shape ...int) ckpt.Tensor {
		p, ok := byName[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("no parameter %s", name))
			return ckpt.Tensor{Name: name, Shape: shape, Values: make([]float64, prod(shape))}
		}
		if fmt.Sprint(p.Shape) != fmt.Sprint(shape) {
			errs = append(errs, fmt.Sprintf("%s has shape %v, want %v", name, p.Shape, shape))
			return ckpt.Tensor{Name: name, Shape: shape, Values: make([]float64, prod(shape))}
		}
		used[name] = true
		return p
	}
	src, ok := byName["src_emb.table"]
	if !ok || len(src.Shape) != 2 {
		return nil, torchConfig{}, fmt.Errorf("no source embedding src_emb.table [V, d]")
	}
	tgt, ok := byName["tgt_emb.table"]
	if !ok || len(tgt.Shape) != 2 {
		return nil, torchConfig{}, fmt.Errorf("no target embedding tgt_emb.table [V, d]")
	}
	m, okM := cfg.Model.(*tasks.TransformerModel)
	data, okD := cfg.Data.(*tasks.Seq2SeqData)
	if !okM || !okD {
		return nil, torchConfig{}, fmt.Errorf("config: not task seq2seq's sections (%T, %T)", cfg.Data, cfg.Model)
	}
	d := m.Dim
	tc := torchConfig{DModel: d, Heads: m.Heads, FF: m.FF, EncLayers: m.EncLayers, DecLayers: m.DecLayers,
		SrcVocab: src.Shape[0], TgtVocab: tgt.Shape[0], MaxLen: data.MaxLen + 1, MaxSourceLen: data.MaxLen,
		PreLN: m.PreLN, FinalNorm: m.FinalNorm, TieOutput: m.TieOutput}
	out := map[string]ckpt.Tensor{}
	put := func(name string, t ckpt.Tensor) {
		out[name] = ckpt.Tensor{Name: name, Shape: t.Shape, Values: t.Values}
	}
	linear := func(to, from string, din, dout int) {
		put(to+".weight", transpose(get(from+".w", din, dout)))
		put(to+".bias", get(from+".b", dout))
	}
	attention := func(to, from string) {
		var w, b []float64
		for _, x := range []string{"q", "k", "v"} {
			w = append(w, transpose(get(from+"."+x+".w", d, d)).Values...)
			b = append(b, get(from+"."+x+".b", d).Values...)
		}
		put(to+".in_proj_weight", ckpt.Tensor{Shape: []int{3 * d, d}, Values: w})
		put(to+".in_proj_bias", ckpt.Tensor{Shape: []int{3 * d}, Values: b})
		linear(to+".out_proj", from+".o", d, d)
	}
	norm := func(to, from string) {
		put(to+".weight", get(from+".g", d))
		put(to+".bias", get(from+".b", d))
	}
	put("src_emb.weight", get("src_emb.table", tc.SrcVocab, d))
	put("tgt_emb.weight", get("tgt_emb.table", tc.TgtVocab, d))
	put("pos", ckpt.Tensor{Shape: []int{tc.MaxLen, d}, Values: layers.SinusoidalEncoding(tc.MaxLen, d)})
	for i := range m.EncLayers {
		to, from := fmt.Sprintf("transformer.encoder.layers.%d", i), fmt.Sprintf("enc.%d", i)
		attention(to+".self_attn", from+".self")
		linear(to+".linear1", from+".ff1", d, m.FF)
		linear(to+".linear2", from+".ff2", m.FF, d)
		norm(to+".norm1", from+".ln1")
		norm(to+".norm2", from+".ln2")
	}
	for i := range m.DecLayers {
		to, from := fmt.Sprintf("transformer.decoder.layers.%d", i), fmt.Sprintf("dec.%d", i)
		attention(to+".self_attn", from+".self")
		attention(to+".multihead_attn", from+".cross")
		linear(to+".linear1", from+".ff1", d, m.FF)
		linear(to+".linear2", from+".ff2", m.FF, d)
		norm(to+".norm1", from+".ln1")
		norm(to+".norm2", from+".ln2")
		norm(to+".norm3", from+".ln3")
	}
	if m.PreLN || m.FinalNorm {
		norm("transformer.encoder.norm", "enc.ln")
		norm("transformer.decoder.norm", "dec.ln")
	}
	if m.TieOutput {
		// out.weight is tgt_emb.weight in the module; load_state_dict
		// wants both names.
		put("out.weight", out["tgt_emb.weight"])
		put("out.bias", get("out.b", tc.TgtVocab))
	} else {
		linear("out", "out", d, tc.TgtVocab)
	}
	for _, p := range params {
		if !used[p.Name] {
			errs = append(errs, fmt.Sprintf("parameter %s has no place in nn.Transformer", p.Name))
		}
	}
	if len(errs) > 0 {
		return nil, tc, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, tc, nil
}

// transpose swaps the axes of a matrix.
func transpose(t ckpt.Tensor) ckpt.Tensor {
	r, c := t.Shape[0], t.Shape[1]
	v := make([]float64, len(t.Values))
	for i := range r {
		for j := range c {
			v[j*r+i] = t.Values[i*c+j]
		}
	}
	return ckpt.Tensor{Name: t.Name, Shape: []int{c, r}, Values: v}
}

func prod(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// exportPyTorch writes a seq2seq checkpoint as a state_dict of
// probformer_torch.ProbformerSeq2Seq, a maxnorm one as a state_dict of
// probformer_torch.ProbformerSetTransformer (safetensors with PyTorch
// names, in the checkpoint's dtype), and the module next to it. meta is the
// safetensors export's metadata.
func exportPyTorch(w io.Writer, ck *ckpt.Checkpoint, cfg *configs.Config, file, out string, meta map[string]string) error {
	if err := torchSupported(cfg, file); err != nil {
		return badInput(err)
	}
	var (
		state  map[string]ckpt.Tensor
		tc     any
		module string
		err    error
	)
	if cfg.Task == "maxnorm" {
		state, tc, err = torchSetStateDict(cfg, ck.Params)
		module = "probformer_torch.ProbformerSetTransformer"
	} else {
		for _, key := range vocabKeys {
			if meta[key] == "" {
				return badInput(fmt.Errorf("checkpoint %s: no %s", file, key))
			}
		}
		state, tc, err = torchStateDict(cfg, ck.Params)
		module = "probformer_torch.ProbformerSeq2Seq"
	}
	if err != nil {
		return badInput(fmt.Errorf("checkpoint %s: %w", file, err))
	}
	tcJSON, err := json.Marshal(tc)
	if err != nil {
		return err
	}
	meta["pytorch_config"] = string(tcJSON)
	meta["pytorch_module"] = module
	meta["task"] = cfg.Task
	stateFile, moduleFile, err := torchOutputs(out)
	if err != nil {
		return badInput(err)
	}
	tensors := make([]ckpt.SafeTensor, 0, len(state))
	for _, name := range slices.Sorted(maps.Keys(state)) {
		tensors = append(tensors, safeTensor(state[name], ck.DType))
	}
	if err := fileio.WriteFileAtomic(stateFile, func(w io.Writer) error {
		return ckpt.WriteSafetensors(w, tensors, meta)
	}); err != nil {
		return badInput(err)
	}
	if err := fileio.WriteFileAtomic(moduleFile, func(w io.Writer) error {
		_, err := io.WriteString(w, torchModule)
		return err
	}); err != nil {
		return badInput(err)
	}
	fmt.Fprintf(w, "wrote a PyTorch state_dict of %d tensors (%s, step %d) to %s and its module to %s\n",
		len(tensors), ck.DType, ck.Step, stateFile, moduleFile)
	return nil
}

// safeTensor is t as a safetensors tensor in dtype.
func safeTensor(t ckpt.Tensor, dtype graph.DType) ckpt.SafeTensor {
	s := ckpt.SafeTensor{Name: t.Name, Shape: t.Shape}
	if dtype == graph.Float32 {
		s.F32 = make([]float32, len(t.Values))
		for j, v := range t.Values {
			s.F32[j] = float32(v)
		}
	} else {
		s.F64 = t.Values
	}
	return s
}
