package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/configs"
)

func newPresetsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "presets [NAME]",
		Short: "List the built-in presets with a line on each, or print one as YAML",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				data, err := configs.PresetYAML(args[0])
				if err != nil {
					return badInput(err)
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			return listPresets(cmd.OutOrStdout())
		},
	}
}

// listPresets writes the presets in alphabetical order, one a line: the
// name, padded to a column, and its description.
func listPresets(w io.Writer) error {
	names := configs.Presets()
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	for _, name := range names {
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width, name, configs.PresetDescription(name)); err != nil {
			return fmt.Errorf("presets: %w", err)
		}
	}
	return nil
}
