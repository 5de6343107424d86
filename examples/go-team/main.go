// A team's training on an existing ACK cluster in Go, from the platform's component package;
// the same stack as examples/yaml-stack, with the training image and a token given as
// outputs (a registry's URL, a secret):
//
//	pulumi package add <path or git URL of this repository>/package
//	pulumi config set --secret kubeconfig "$(cat ~/.kube/ack)"
//	pulumi config set trainingImage registry-vpc.cn-hangzhou.aliyuncs.com/team-a/trainer:v1.4.2
//	pulumi config set --secret hfToken <token>
//	pulumi up
//
// pulumi package add prints the SDK's import path for go.mod; the package is imported as platform.
package main

import (
	kubernetes "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	platform "example.com/team-training-go/sdks/ack-training-platform/acktrainingplatform"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		conf := config.New(ctx, "")
		cluster, err := kubernetes.NewProvider(ctx, "cluster", &kubernetes.ProviderArgs{
			Kubeconfig: conf.RequireSecret("kubeconfig"),
		})
		if err != nil {
			return err
		}
		team, err := platform.NewTeamTraining(ctx, "team", &platform.TeamTrainingArgs{
			Provider: cluster,
			Namespace: &platform.TrainingNamespaceSpecArgs{
				Namespace: pulumi.String("team-a"),
				GpuQuota:  pulumi.Int(4),
			},
			Storage: &platform.StorageSpecArgs{
				StorageClassName:   pulumi.String("alibabacloud-cnfs-nas"),
				CreateStorageClass: pulumi.Bool(false),
			},
			Pool: &platform.GpuPoolSpecArgs{
				Name:          pulumi.String("a10"),
				InstanceTypes: pulumi.StringArray{pulumi.String("ecs.gn7i-c8g1.2xlarge")},
				GpusPerNode:   pulumi.Int(1),
				MaxSize:       pulumi.Int(4),
			},
			Jobs: platform.TrainingJobSpecArray{
				&platform.TrainingJobSpecArgs{
					Name:   pulumi.String("finetune"),
					Image:  pulumi.String(conf.Require("trainingImage")),
					Cpu:    pulumi.String("6"),
					Memory: pulumi.String("24Gi"),
					Env:    pulumi.Map{"HF_TOKEN": conf.RequireSecret("hfToken")},
					Trainer: &platform.TrainerArgsArgs{
						Model:    pulumi.String("gpt"),
						Parallel: platform.TrainerArgsParallelFSDP,
						MaxSteps: pulumi.Int(20000),
					},
				},
			},
		})
		if err != nil {
			return err
		}
		ctx.Export("jobs", team.Jobs)
		return nil
	})
}
