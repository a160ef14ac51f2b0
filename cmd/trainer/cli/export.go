package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/fileio"
)

func newExportCommand() *cobra.Command {
	var path, format, out string
	var printModule bool
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a checkpoint's parameters in a format other tools read",
		Long: `Write a checkpoint's parameters as a safetensors file, which PyTorch, NumPy
and Hugging Face load. Tensors are named by their hierarchical parameter
names (enc.0.mab.q.w); __metadata__ holds the run's config as JSON, the step
and "format": "pt". --checkpoint takes a file or a run directory (its best
checkpoint).

A model with vocabularies (seq2seq, mlm) carries them too, as JSON under
src_vocab and tgt_vocab (mlm: src_vocab only): {"tokens": [...] in id order,
"lowercase": data.lowercase, "tokenize": "whitespace", "pad_id": 0,
"unk_id": 1, "bos_id": 2, "eos_id": 3}. A line is lowercased if lowercase
is true, split on whitespace, and each word maps to its index in tokens, or
to unk_id. The config's file paths are cut to their base names: the export
holds no path of the training machine.

--format pytorch (seq2seq and Set Transformer checkpoints with softmax
scaled_dot attention) writes a state_dict of the PyTorch module
probformer_torch.ProbformerSeq2Seq (nn.Transformer with probformer's
embeddings, √d scale, sinusoidal positions and output layer) or
probformer_torch.ProbformerSetTransformer, as safetensors with PyTorch's names and
layouts, in the checkpoint's dtype, with the same metadata plus
pytorch_config (the module's keyword arguments). The module's file,
probformer_torch.py, is written next to it; it needs torch and numpy only:

  model, src_vocab, tgt_vocab = probformer_torch.from_export("model.safetensors")

--out is the state_dict's file if it ends in .safetensors, else a directory
that receives model.safetensors and probformer_torch.py.
--print-module prints the module and exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "safetensors" && format != "pytorch" {
				return badInput(fmt.Errorf("--format %q: want safetensors or pytorch", format))
			}
			if printModule {
				if format != "pytorch" {
					return badInput(fmt.Errorf("--print-module needs --format pytorch"))
				}
				_, err := io.WriteString(cmd.OutOrStdout(), torchModule)
				return err
			}
			for _, f := range []struct{ name, v string }{{"checkpoint", path}, {"out", out}} {
				if f.v == "" {
					return badInput(fmt.Errorf("required flag(s) %q not set", f.name))
				}
			}
			// A run directory whose best checkpoint does not load gives its
			// newest step checkpoint that does, with a warning.
			ck, file, err := readCheckpoint(path, true, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := train.UseAverage(ck); err != nil {
				return badInput(fmt.Errorf("checkpoint %s: %w", file, err))
			}
			cfg, err := checkpointConfig(ck, file)
			if err != nil {
				return err
			}
			cfgJSON, err := exportConfig(cfg).JSON()
			if err != nil {
				return err
			}
			meta := map[string]string{"format": "pt", "config": string(cfgJSON), "step": strconv.Itoa(ck.Step), "source": "probformer"}
			for _, key := range vocabKeys {
				if ck.Extra[key] == nil {
					continue
				}
				lower, _ := cfg.Get("data.lowercase")
				v, err := exportVocab(ck.Extra[key], lower == true)
				if err != nil {
					return badInput(fmt.Errorf("checkpoint %s: %s: %w", file, key, err))
				}
				meta[key] = v
			}
			if format == "pytorch" {
				// The PyTorch module is built from the config's sizes:
				// held to an evaluation's rules and memory estimate
				// first, as eval holds it (a checkpoint whose config was
				// edited could ask for a width of a billion).
				cfg.ForInference = true
				if err := cfg.Validate(); err != nil {
					return badInput(fmt.Errorf("checkpoint %s: config: %w", file, err))
				}
				return exportPyTorch(cmd.OutOrStdout(), ck, cfg, file, out, meta)
			}
			tensors := make([]ckpt.SafeTensor, len(ck.Params))
			for i, p := range ck.Params {
				tensors[i] = ckpt.SafeTensor{Name: p.Name, Shape: p.Shape}
				if ck.DType == graph.Float32 {
					tensors[i].F32 = make([]float32, len(p.Values))
					for j, v := range p.Values {
						tensors[i].F32[j] = float32(v)
					}
				} else {
					tensors[i].F64 = p.Values
				}
			}
			if err := fileio.WriteFileAtomic(out, func(w io.Writer) error {
				return ckpt.WriteSafetensors(w, tensors, meta)
			}); err != nil {
				return badInput(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d tensors (%s, step %d) to %s\n", len(tensors), ck.DType, ck.Step, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "checkpoint", "", "checkpoint file or run directory (required)")
	cmd.Flags().StringVar(&format, "format", "safetensors", "output format: safetensors, or pytorch (a state_dict of probformer_torch.py's module)")
	cmd.Flags().StringVar(&out, "out", "", "output file, or with --format pytorch a directory (required)")
	cmd.Flags().BoolVar(&printModule, "print-module", false, "with --format pytorch: print the PyTorch module's Python code and exit")
	return cmd
}

// vocabKeys are the checkpoint entries (task state) holding vocabularies,
// exported under the same names.
var vocabKeys = []string{"src_vocab", "tgt_vocab"}

// exportedVocab is a vocabulary as an export's metadata holds it: enough
// for another program to turn text into the model's ids.
type exportedVocab struct {
	// Tokens are the words in id order, the special tokens first.
	Tokens []string `json:"tokens"`
	// Lowercase is data.lowercase: text is lowercased before it is split.
	Lowercase bool `json:"lowercase"`
	// Tokenize is how a line splits into words: "whitespace".
	Tokenize string `json:"tokenize"`
	PadID    int    `json:"pad_id"`
	UnkID    int    `json:"unk_id"`
	BOSID    int    `json:"bos_id"`
	EOSID    int    `json:"eos_id"`
}

// exportVocab turns a checkpoint's vocabulary (datasets.Vocab's JSON) into
// the metadata value of an export.
func exportVocab(state []byte, lowercase bool) (string, error) {
	var v datasets.Vocab
	if err := json.Unmarshal(state, &v); err != nil {
		return "", err
	}
	out, err := json.Marshal(exportedVocab{Tokens: v.Words(), Lowercase: lowercase, Tokenize: "whitespace",
		PadID: datasets.PadID, UnkID: datasets.UnkID, BOSID: datasets.BOSID, EOSID: datasets.EOSID})
	return string(out), err
}

// exportConfig is cfg with its file paths cut to their base names, for an
// export that leaves the training machine.
func exportConfig(cfg *configs.Config) *configs.Config {
	c := cfg.Clone()
	for _, p := range pathKeys(c) {
		if *p != "" {
			*p = filepath.Base(filepath.FromSlash(*p))
		}
	}
	return c
}
