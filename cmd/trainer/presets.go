package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/configs"
)

func newPresetsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "presets [NAME]",
		Short: "List the built-in presets, or print one as YAML",
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
			for _, name := range configs.Presets() {
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
}
