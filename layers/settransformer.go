package layers

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// SetTransformerConfig is the architecture of a Set Transformer.
type SetTransformerConfig struct {
	DimIn      int             `yaml:"dim_in" json:"dim_in"`
	Dim        int             `yaml:"dim" json:"dim"`
	Heads      int             `yaml:"heads" json:"heads"`
	DimOut     int             `yaml:"dim_out" json:"dim_out"`
	Encoder    string          `yaml:"encoder" json:"encoder"` // "sab" or "isab"
	Blocks     int             `yaml:"blocks" json:"blocks"`
	Inducing   int             `yaml:"inducing" json:"inducing"` // ISAB inducing points
	Seeds      int             `yaml:"seeds" json:"seeds"`       // PMA seed vectors
	DecoderSAB bool            `yaml:"decoder_sab" json:"decoder_sab"`
	LayerNorm  bool            `yaml:"layer_norm" json:"layer_norm"`
	Attention  AttentionConfig `yaml:"attention" json:"attention"`
}

// Validate reports the first inconsistent field.
func (c SetTransformerConfig) Validate() error {
	switch {
	case c.DimIn <= 0:
		return fmt.Errorf("dim_in must be positive, is %d", c.DimIn)
	case c.Dim <= 0:
		return fmt.Errorf("dim must be positive, is %d", c.Dim)
	case c.Heads <= 0 || c.Dim%c.Heads != 0:
		return fmt.Errorf("heads = %d must divide dim = %d", c.Heads, c.Dim)
	case c.DimOut <= 0:
		return fmt.Errorf("dim_out must be positive, is %d", c.DimOut)
	case c.Encoder != "sab" && c.Encoder != "isab":
		return fmt.Errorf("encoder must be sab or isab, is %q", c.Encoder)
	case c.Blocks < 0:
		return fmt.Errorf("blocks must be ≥ 0, is %d", c.Blocks)
	case c.Encoder == "isab" && c.Inducing <= 0:
		return fmt.Errorf("inducing must be positive for an isab encoder, is %d", c.Inducing)
	case c.Seeds <= 0:
		return fmt.Errorf("seeds must be positive, is %d", c.Seeds)
	}
	_, err := NewKernel(c.Attention)
	return err
}

// SetTransformer maps a set to Seeds output vectors (Lee et al. 2019 §3):
//
//	Z = Encoder(X) = Block_L(… Block_1(X))        SAB or ISAB blocks
//	O = Linear(SAB?(PMA_k(Z)))
//
// Parameters: enc.<i>, dec.pma, dec.sab, head.
type SetTransformer struct {
	Config SetTransformerConfig
}

// Forward: x [B, N, DimIn], mask [B, N] (1 real, 0 padding; nil: none) →
// [B, Seeds, DimOut].
func (s SetTransformer) Forward(b *graph.Builder, x, mask *graph.Node) *graph.Node {
	c := s.Config
	kernel, err := NewKernel(c.Attention)
	if err != nil {
		b.Fail(err)
	}
	mab := func(name string) MAB {
		return MAB{Name: name, Dim: c.Dim, Heads: c.Heads, LayerNorm: c.LayerNorm, Kernel: kernel}
	}
	h := x
	for i := range c.Blocks {
		name := fmt.Sprintf("enc.%d", i)
		if c.Encoder == "isab" {
			h = ISAB{Name: name, Inducing: c.Inducing, MAB: mab("")}.Forward(b, h, mask)
		} else {
			h = SAB{MAB: mab(name + ".mab")}.Forward(b, h, mask)
		}
	}
	z := PMA{Name: "dec.pma", Seeds: c.Seeds, MAB: mab("")}.Forward(b, h, mask)
	if c.DecoderSAB {
		z = SAB{MAB: mab("dec.sab.mab")}.Forward(b, z, nil)
	}
	return dense(b, "head", z, c.DimOut)
}
